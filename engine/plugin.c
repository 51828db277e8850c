/*
** plugin.c: finding and loading plugins.
**
** Architecture plugins live in PLUGINS/arch/, kernel libraries in
** PLUGINS/kernels/.  Loading is strict: a .so built against another ABI, one
** missing a required export, or two plugins claiming the same (id, quant)
** pair stop the load with the file named, because a silently skipped plugin
** turns into a confusing "architecture not supported" later.
*/
#include "engine_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *rad_plugin_dir_resolve(const char *plugin_dir)
{
    char buf[PATH_MAX + 64];
    if (plugin_dir && *plugin_dir) return strdup(plugin_dir);
    const char *home = getenv("RADIANCE_HOME");
    if (home && *home) {
        snprintf(buf, sizeof buf, "%s/plugins", home);
        return strdup(buf);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return strdup("plugins");
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(buf, sizeof buf, "%s/plugins", exe);
    if (is_dir(buf)) return strdup(buf);
    snprintf(buf, sizeof buf, "%s/../lib/radiance/plugins", exe);
    return strdup(buf);
}

/* The .so files in dir, sorted so that load order (and messages) do not
** depend on the file system. */
static int list_shared_objects(const char *dir, char ***out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;               /* an absent folder holds no plugins */
    struct dirent *e;
    char **names = NULL;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0) continue;
        char **grown = realloc(names, (size_t)(n + 1) * sizeof *names);
        if (!grown) break;
        names = grown;
        size_t need = strlen(dir) + len + 2;
        names[n] = malloc(need);
        if (!names[n]) break;
        snprintf(names[n], need, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t;
        }
    *out = names;
    *n_out = n;
    return 0;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The smallest plugin info of architecture ABI 2: up to its description. */
#define PLUGIN_INFO_MIN (offsetof(RadPluginInfo, description) + sizeof(const char *))

static int load_arch(const char *path, RadArchPlugin *p)
{
    memset(p, 0, sizeof *p);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return rad_error_set(RAD_E_ABI, "%s: cannot load plugin: %s", path, dlerror());
    RadPluginInfoFn info = (RadPluginInfoFn)dlsym(h, "rad_plugin_info");
    p->declare = (RadArchDeclareFn)dlsym(h, "rad_arch_declare");
    p->step = (RadArchStepFn)dlsym(h, "rad_arch_step");
    p->release = (RadArchReleaseFn)dlsym(h, "rad_arch_release");
    const char *missing = !info ? "rad_plugin_info" : !p->declare ? "rad_arch_declare"
                        : !p->step ? "rad_arch_step" : NULL;
    if (missing) {
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: not an architecture plugin: it does not export %s",
                             path, missing);
    }
    /* The version first: the fields after it moved between versions. */
    const RadPluginInfo *raw = info();
    if (!raw || raw->abi_version != RAD_ARCH_ABI_VERSION || raw->kind != RAD_PLUGIN_ARCH) {
        int v = raw ? raw->abi_version : -1;
        dlclose(h);
        return rad_error_set(RAD_E_ABI,
                             "%s: built for architecture ABI %d, this radiance speaks %d: rebuild the plugin",
                             path, v, RAD_ARCH_ABI_VERSION);
    }
    if (raw->struct_size < (int)PLUGIN_INFO_MIN) {
        int size = raw->struct_size;
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: plugin info of %d bytes is below architecture ABI %d's %zu: rebuild the plugin",
                             path, size, RAD_ARCH_ABI_VERSION, PLUGIN_INFO_MIN);
    }
    memset(&p->info_copy, 0, sizeof p->info_copy);
    memcpy(&p->info_copy, raw, (size_t)raw->struct_size < sizeof p->info_copy ? (size_t)raw->struct_size
                                                                               : sizeof p->info_copy);
    p->info = &p->info_copy;
    if (!p->info->name || !p->info->arch_id || !p->info->quant) {
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: plugin info lacks a name, id or quant", path);
    }
    if (!p->release) {
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: not an architecture plugin of ABI %d: it does not export rad_arch_release",
                             path, RAD_ARCH_ABI_VERSION);
    }
    p->hf_names = (RadArchHfNamesFn)dlsym(h, "rad_arch_hf_names");
    p->gguf_families = (RadArchGgufFamiliesFn)dlsym(h, "rad_arch_gguf_families");
    p->probe = (RadArchProbeFn)dlsym(h, "rad_arch_probe");
    p->chat_format = (RadArchChatFormatFn)dlsym(h, "rad_arch_chat_format");
    p->handle = h;
    p->path = strdup(path);
    return p->path ? RAD_OK : RAD_E_NOMEM;
}

/* The smallest table of this ABI version: every field up to fini. */
#define LIBRARY_MIN_SIZE ((int)(offsetof(RadKernelLibrary, fini) + sizeof(void (*)(void))))
#define ROW_MIN_SIZE ((int)(offsetof(RadKernelRow, relayout) + sizeof(void *)))
#define SCHEMA_MIN_SIZE ((int)sizeof(RadOpSchema))

/* Copy n elements of `size` bytes each (as the library was built) into an
** array of `full`-byte elements (as this core knows them), zero-filling
** the fields the library did not know: the growth rule of rad_kernel.h. */
static void *copy_strided(const void *src, int n, int size, size_t full)
{
    char *out = calloc((size_t)(n > 0 ? n : 1), full);
    if (!out) return NULL;
    size_t take = (size_t)size < full ? (size_t)size : full;
    for (int i = 0; i < n; i++) memcpy(out + (size_t)i * full, (const char *)src + (size_t)i * (size_t)size, take);
    return out;
}

static int load_kernels(const char *path, RadKernelLib *k)
{
    memset(k, 0, sizeof *k);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return rad_error_set(RAD_E_ABI, "%s: cannot load kernel library: %s", path, dlerror());
    const RadKernelLibrary *lib = dlsym(h, RAD_KERNEL_LIBRARY_SYMBOL);
    if (!lib) {
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: not a kernel library: it does not export %s",
                             path, RAD_KERNEL_LIBRARY_SYMBOL);
    }
    /* The version first: an older table may not even have the size fields. */
    if (lib->abi_version != RAD_KERNEL_ABI_VERSION) {
        int v = lib->abi_version;
        dlclose(h);
        return rad_error_set(RAD_E_ABI,
                             "%s: built for kernel ABI %d, this radiance speaks %d: rebuild the library",
                             path, v, RAD_KERNEL_ABI_VERSION);
    }
    if (lib->struct_size < LIBRARY_MIN_SIZE || lib->row_size < ROW_MIN_SIZE || lib->schema_size < SCHEMA_MIN_SIZE) {
        int s = lib->struct_size, r = lib->row_size, c = lib->schema_size;
        dlclose(h);
        return rad_error_set(RAD_E_ABI,
                             "%s: kernel table sizes %d/%d/%d (library/row/schema) are below kernel ABI %d's "
                             "%d/%d/%d: rebuild the library", path, s, r, c, RAD_KERNEL_ABI_VERSION,
                             LIBRARY_MIN_SIZE, ROW_MIN_SIZE, SCHEMA_MIN_SIZE);
    }
    /* init may fill in the table (the cpu library picks its rows by ISA), so
    ** it runs before the table is read. */
    RadKernelLibrary head;
    memset(&head, 0, sizeof head);
    memcpy(&head, lib, (size_t)lib->struct_size < sizeof head ? (size_t)lib->struct_size : sizeof head);
    if (head.init && head.init() != 0) {
        dlclose(h);
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: kernel library '%s' failed to initialise", path,
                             head.name ? head.name : "?");
    }
    RadKernelLibrary *norm = copy_strided(lib, 1, lib->struct_size, sizeof *norm);
    if (!norm) { dlclose(h); return RAD_E_NOMEM; }
    if (!norm->name || norm->n_rows < 0 || norm->n_schemas < 0 || (norm->n_rows > 0 && !norm->rows) ||
        (norm->n_schemas > 0 && !norm->schemas)) {
        free(norm);
        dlclose(h);
        return rad_error_set(RAD_E_ABI, "%s: kernel library table lacks its name, rows or schemas", path);
    }
    norm->rows = copy_strided(norm->rows, norm->n_rows, lib->row_size, sizeof(RadKernelRow));
    norm->schemas = copy_strided(norm->schemas, norm->n_schemas, lib->schema_size, sizeof(RadOpSchema));
    norm->struct_size = (int)sizeof *norm;
    norm->row_size = (int)sizeof(RadKernelRow);
    norm->schema_size = (int)sizeof(RadOpSchema);
    k->handle = h;
    k->lib = norm;
    if (!norm->rows || !norm->schemas) return RAD_E_NOMEM;     /* the caller frees k */
    k->path = strdup(path);
    return k->path ? RAD_OK : RAD_E_NOMEM;
}

static void free_kernels(RadKernelLib *k)
{
    if (!k->lib) return;
    free((void *)k->lib->rows);
    free((void *)k->lib->schemas);
    free((void *)k->lib);
    if (k->handle) dlclose(k->handle);
    free(k->path);
    memset(k, 0, sizeof *k);
}

int rad_plugins_load(const char *dir, RadPluginSet *set)
{
    memset(set, 0, sizeof *set);
    set->dir = strdup(dir);
    char sub[PATH_MAX];
    char **names;
    int n, rc = RAD_OK;

    snprintf(sub, sizeof sub, "%s/arch", dir);
    list_shared_objects(sub, &names, &n);
    set->arch = calloc((size_t)n + 1, sizeof *set->arch);
    for (int i = 0; i < n && rc == RAD_OK; i++) {
        rc = load_arch(names[i], &set->arch[set->n_arch]);
        if (rc) break;
        const RadPluginInfo *mine = set->arch[set->n_arch].info;
        for (int j = 0; j < set->n_arch; j++) {
            const RadPluginInfo *other = set->arch[j].info;
            if (strcmp(mine->arch_id, other->arch_id) == 0 && strcmp(mine->quant, other->quant) == 0) {
                rc = rad_error_set(RAD_E_ABI, "%s and %s both claim architecture '%s' at '%s': remove one",
                                   set->arch[j].path, names[i], mine->arch_id, mine->quant);
                break;
            }
        }
        set->n_arch++;
    }
    free_names(names, n);

    snprintf(sub, sizeof sub, "%s/kernels", dir);
    list_shared_objects(sub, &names, &n);
    set->kernels = calloc((size_t)n + 1, sizeof *set->kernels);
    for (int i = 0; i < n && rc == RAD_OK; i++) {
        rc = load_kernels(names[i], &set->kernels[set->n_kernels]);
        if (rc) { free_kernels(&set->kernels[set->n_kernels]); break; }
        const char *mine = set->kernels[set->n_kernels].lib->name;
        set->n_kernels++;
        for (int j = 0; j + 1 < set->n_kernels; j++)
            if (strcmp(set->kernels[j].lib->name, mine) == 0) {
                rc = rad_error_set(RAD_E_ABI, "%s and %s are both kernel library '%s': remove one",
                                   set->kernels[j].path, names[i], mine);
                break;
            }
    }
    free_names(names, n);
    if (rc) rad_plugins_free(set);
    return rc;
}

void rad_plugins_free(RadPluginSet *set)
{
    for (int i = 0; i < set->n_arch; i++) {
        dlclose(set->arch[i].handle);
        free(set->arch[i].path);
    }
    for (int i = 0; i < set->n_kernels; i++) {
        if (set->kernels[i].lib->fini) set->kernels[i].lib->fini();
        free_kernels(&set->kernels[i]);
    }
    free(set->arch);
    free(set->kernels);
    free(set->dir);
    memset(set, 0, sizeof *set);
}

/* ------------------------------------------------------------ sharing */

/* Every engine of a process that reads one plugin folder shares one loaded
** set: a plugin is dlopen'ed once, a kernel library's init runs once (the cpu
** library fills its dispatch tables there, and must not do it again under an
** engine that is running), and the set is unloaded when the last engine
** using it closes. */
typedef struct SharedSet {
    RadPluginSet set;
    int refs;
    struct SharedSet *next;
} SharedSet;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static SharedSet *shared_sets;

int rad_plugins_acquire(const char *dir, const RadPluginSet **out)
{
    *out = NULL;
    pthread_mutex_lock(&shared_lock);
    SharedSet *s = shared_sets;
    while (s && strcmp(s->set.dir, dir) != 0) s = s->next;
    int rc = RAD_OK;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) rc = RAD_E_NOMEM;
        else if ((rc = rad_plugins_load(dir, &s->set)) != RAD_OK) { free(s); s = NULL; }
        else { s->next = shared_sets; shared_sets = s; }
    }
    if (s) { s->refs++; *out = &s->set; }
    pthread_mutex_unlock(&shared_lock);
    return rc;
}

void rad_plugins_release(const RadPluginSet *set)
{
    if (!set) return;
    pthread_mutex_lock(&shared_lock);
    for (SharedSet **at = &shared_sets; *at; at = &(*at)->next) {
        if (&(*at)->set != set) continue;
        SharedSet *s = *at;
        if (--s->refs == 0) {
            *at = s->next;
            rad_plugins_free(&s->set);
            free(s);
        }
        break;
    }
    pthread_mutex_unlock(&shared_lock);
}

const RadArchPlugin *rad_plugins_find(const RadPluginSet *set, const char *id, const char *quant)
{
    for (int i = 0; i < set->n_arch; i++)
        if (strcmp(set->arch[i].info->arch_id, id) == 0 && strcmp(set->arch[i].info->quant, quant) == 0)
            return &set->arch[i];
    return NULL;
}

const RadArchPlugin *rad_plugins_find_hf(const RadPluginSet *set, const char *hf_arch)
{
    for (int i = 0; i < set->n_arch; i++) {
        if (!set->arch[i].hf_names) continue;
        for (const char *const *name = set->arch[i].hf_names(); name && *name; name++)
            if (strcmp(*name, hf_arch) == 0) return &set->arch[i];
    }
    return NULL;
}

static int preference(const RadKernelLibrary *lib) { return lib->preference > 0 ? lib->preference : 10; }

int rad_plugins_resolve_gguf(const RadPluginSet *set, RadMetaTable *t, const char *path)
{
    const RadMetaKV *gguf = rad_meta_table_find(t, "arch.gguf");
    if (!gguf || gguf->type != RAD_META_STRING || rad_meta_table_find(t, "arch.id")) return RAD_OK;
    for (int i = 0; i < set->n_arch; i++) {
        const RadArchPlugin *p = &set->arch[i];
        if (!p->gguf_families) continue;
        for (const RadGgufFamily *f = p->gguf_families(); f && f->struct_size > 0 && f->gguf_arch; f++) {
            if (strcmp(f->gguf_arch, gguf->s) != 0) continue;
            int rc = rad_meta_table_set_string(t, "arch.id", p->info->arch_id);
            if (!rc) rc = rad_meta_table_set_string(t, "arch.hf_name", f->hf_arch ? f->hf_arch : "");
            /* what the family's files imply, unless the file says it itself */
            for (int k = 0; !rc && k < f->n_implied; k++)
                if (!rad_meta_table_find(t, f->implied[k].key)) rc = rad_meta_table_append(t, &f->implied[k]);
            return rc ? rad_error_set(rc, "%s: out of memory reading the metadata", path) : RAD_OK;
        }
    }
    return rad_error_set(RAD_E_UNSUPPORTED, "%s: no installed plugin serves GGUF architecture '%s' (installed in %s/arch)",
                         path, gguf->s, set->dir);
}

int rad_container_resolve_family(RadContainer *c, const char *plugin_dir)
{
    char *dir = rad_plugin_dir_resolve(plugin_dir);
    const RadPluginSet *set;
    int rc = rad_plugins_acquire(dir, &set);
    free(dir);
    if (rc) return rc;
    rc = rad_plugins_resolve_gguf(set, &c->meta, c->path);
    rad_plugins_release(set);
    return rc;
}

const char *rad_plugins_default_order(const RadPluginSet *set)
{
    /* Every library installed, most preferred first (a tie goes by name,
    ** so the order never depends on the file system). */
    static __thread char order[512];
    const RadKernelLibrary *libs[64];
    int n = 0;
    for (int i = 0; i < set->n_kernels && n < 64; i++) libs[n++] = set->kernels[i].lib;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const RadKernelLibrary *a = libs[j - 1], *b = libs[j];
            if (preference(a) > preference(b) || (preference(a) == preference(b) && strcmp(a->name, b->name) <= 0))
                break;
            libs[j - 1] = b;
            libs[j] = a;
        }
    size_t at = 0;
    order[0] = 0;
    for (int i = 0; i < n && at < sizeof order; i++)
        at += (size_t)snprintf(order + at, sizeof order - at, "%s%s", i ? "," : "", libs[i]->name);
    return n ? order : "ref";
}

int rad_plugins_kernel_order(const RadPluginSet *set, const char *order,
                             const RadKernelLibrary **libs, int max, int *n)
{
    *n = 0;
    char *copy = strdup(order ? order : "ref");
    if (!copy) return RAD_E_NOMEM;
    int rc = RAD_OK;
    char *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const RadKernelLibrary *found = NULL;
        for (int i = 0; i < set->n_kernels; i++)
            if (strcmp(set->kernels[i].lib->name, name) == 0) found = set->kernels[i].lib;
        if (!found) {
            rc = rad_error_set(RAD_E_NOTFOUND, "--kernels: no kernel library named '%s' in %s/kernels",
                               name, set->dir);
            break;
        }
        if (*n < max) libs[(*n)++] = found;
    }
    free(copy);
    if (rc == RAD_OK && *n == 0)
        rc = rad_error_set(RAD_E_ARG, "--kernels: no library named");
    return rc;
}

int rad_list_plugins(const char *plugin_dir, FILE *f)
{
    char *dir = rad_plugin_dir_resolve(plugin_dir);
    const RadPluginSet *set;
    int rc = rad_plugins_acquire(dir, &set);
    if (rc == RAD_OK) {
        fprintf(f, "architecture plugins in %s/arch:\n", dir);
        for (int i = 0; i < set->n_arch; i++) {
            const RadArchPlugin *p = &set->arch[i];
            fprintf(f, "  %-18s id=%-8s quant=%-6s %s", p->info->name, p->info->arch_id,
                    p->info->quant, p->info->description);
            if (p->hf_names) {
                fprintf(f, " [");
                int first = 1;
                for (const char *const *n = p->hf_names(); n && *n; n++, first = 0)
                    fprintf(f, "%s%s", first ? "" : " ", *n);
                fprintf(f, "]");
            }
            fprintf(f, "\n");
        }
        rad_plugins_release(set);
    }
    free(dir);
    return rc;
}

int rad_list_kernels(const char *plugin_dir, FILE *f)
{
    char *dir = rad_plugin_dir_resolve(plugin_dir);
    const RadPluginSet *set;
    int rc = rad_plugins_acquire(dir, &set);
    if (rc == RAD_OK) {
        for (int i = 0; i < set->n_kernels; i++) {
            const RadKernelLibrary *lib = set->kernels[i].lib;
            fprintf(f, "kernel library '%s' (%s): %s\n", lib->name, set->kernels[i].path, lib->description);
            for (int r = 0; r < lib->n_rows; r++) {
                const RadKernelRow *row = &lib->rows[r];
                fprintf(f, "  %-14s %-22s priority %d%s\n", row->op, row->name, row->priority,
                        row->domain == RAD_DOMAIN_DEVICE ? " device" : "");
            }
        }
        rad_plugins_release(set);
    }
    free(dir);
    return rc;
}
