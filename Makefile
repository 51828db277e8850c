# radiance: the one build.
#
#   make            the binary and its plugins under build/
#   make test       every test (unit, ops, arch, golden, e2e)
#   make asan       the same tests under AddressSanitizer + UBSan, in build-asan/
#   make install    PREFIX/bin/radiance, PREFIX/lib/radiance/plugins, man pages
#   make deps       the Debian packages building and running need (run as root)
#   make test-deps  those and the test toolchain (tmux, clang, qemu, ...); the README's test command
#
# The core (base, formats, engine) is one static library linked into the
# binary with its symbols exported, so architecture plugins resolve the
# rad_decl_* / rad_issue functions from the binary at dlopen.  Plugins and
# kernel libraries are separate .so files; the llama plugin is built once per
# weight format from one source.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
SAN     ?=
WARN     = -Wall -Wextra -Wno-missing-field-initializers
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -Ibase -fPIC $(WARN) $(CFLAGS) $(SAN)
LDLIBS   = -luring -ljansson -lpcre2-8 -lutf8proc -lcurl -lsqlite3 -lcrypto -lzstd -lreadline -lncursesw -lmd4c -lpthread -ldl -lm
TESTLIBS = -lcmocka $(LDLIBS)
TEST_INC = -Iformats -Iengine -Ikernels/ops

CORE_SRC := $(wildcard base/*.c formats/*.c engine/*.c engine/text/*.c)
APP_SRC  := $(wildcard app/*.c app/*/*.c)
# The op vocabulary, its checks and the encodings' decoders (kernels/ops)
# are compiled into every kernel library.
OPS_SRC  := $(wildcard kernels/ops/*.c)
REF_SRC  := $(wildcard kernels/ref/*.c) $(OPS_SRC) base/encoding.c
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
# Plugins and kernel libraries depend on the ABI headers only, so editing an
# app header does not relink a plugin under a running test.
ABI_HEADERS := $(wildcard base/*.h engine/include/*.h arch/*.h arch/common/*.h kernels/*.h kernels/ops/*.h kernels/ref/*.h)
HEADERS  := $(ABI_HEADERS) $(wildcard formats/*.h engine/*.h engine/text/*.h app/*.h app/*/*.h)

QUANTS   := f32 f16 bf16 q8_0 q4_0 q4_k gguf
ENC_f32  := RAD_ENC_F32
ENC_f16  := RAD_ENC_F16
ENC_bf16 := RAD_ENC_BF16
ENC_q8_0 := RAD_ENC_Q8_0
ENC_q4_0 := RAD_ENC_Q4_0
ENC_q4_k := RAD_ENC_Q4_K
ENC_gguf := -1     # each weight as the file stores it
ENC_mxfp4 := RAD_ENC_MXFP4   # gpt-oss only: the experts mxfp4, the other matrices bf16
ARCH_SO  := $(foreach q,$(QUANTS),$(BUILD)/plugins/arch/llama_$(q).so)
ARCH_SO  += $(foreach q,$(QUANTS),$(BUILD)/plugins/arch/gemma3_$(q).so)
ARCH_SO  += $(foreach q,$(QUANTS) mxfp4,$(BUILD)/plugins/arch/gptoss_$(q).so)
KERN_SO  := $(BUILD)/plugins/kernels/ref.so $(BUILD)/plugins/kernels/cpu.so

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test_*.c))
OPS_TESTS  := $(patsubst tests/ops/%.c,$(BUILD)/tests/ops/%,$(wildcard tests/ops/test_*.c))
ARCH_TESTS := $(patsubst tests/arch/%.c,$(BUILD)/tests/arch/%,$(wildcard tests/arch/test_*.c))
GOLDEN_TESTS := $(patsubst tests/golden/%.c,$(BUILD)/tests/golden/%,$(wildcard tests/golden/test_*.c))
TEXT_TESTS := $(patsubst tests/text/%.c,$(BUILD)/tests/text/%,$(wildcard tests/text/test_*.c))
MODEL_TESTS := $(patsubst tests/models/%.c,$(BUILD)/tests/models/%,$(wildcard tests/models/test_*.c))

.PHONY: all test asan install deps test-deps clean neon-test unit-test ops-test arch-test golden-test text-test e2e-test test-models fuzz-smoke fuzz
all: $(BUILD)/radiance $(ARCH_SO) $(KERN_SO)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libradcore.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The binary exports what rad_core.h declares and nothing else (Lua's
# boundary): the list is made from the header, so the two cannot drift, and
# tests/e2e/test_abi.sh checks `nm -D` against the header.
$(BUILD)/rad_core.dynlist: engine/include/rad_core.h
	@mkdir -p $(dir $@)
	{ echo '{'; sed -n 's/^[a-zA-Z_][a-zA-Z0-9_ *]*[ *]\(rad_[a-z0-9_]*\)(.*/  \1;/p' $<; echo '};'; } > $@

$(BUILD)/radiance: $(APP_OBJ) $(BUILD)/libradcore.a $(BUILD)/rad_core.dynlist
	$(CC) $(ALL_CFLAGS) -Wl,--dynamic-list=$(BUILD)/rad_core.dynlist -o $@ $(APP_OBJ) -Wl,--whole-archive $(BUILD)/libradcore.a -Wl,--no-whole-archive $(LDLIBS)

# A plugin carries the encodings table itself (base/encoding.c), as kernel
# libraries do, so that it needs from the binary only what rad_core.h says.
$(BUILD)/plugins/arch/llama_%.so: arch/llama/llama.c base/encoding.c $(ABI_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -DRAD_QUANT='"$*"' -DRAD_QUANT_ENC=$(ENC_$*) -o $@ $< base/encoding.c -lm

$(BUILD)/plugins/arch/gemma3_%.so: arch/gemma3/gemma3.c base/encoding.c $(ABI_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -DRAD_QUANT='"$*"' -DRAD_QUANT_ENC=$(ENC_$*) -o $@ $< base/encoding.c -lm

$(BUILD)/plugins/arch/gptoss_%.so: arch/gptoss/gptoss.c base/encoding.c $(ABI_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -DRAD_QUANT='"$*"' -DRAD_QUANT_ENC=$(ENC_$*) -o $@ $< base/encoding.c -lm

$(BUILD)/plugins/kernels/ref.so: $(REF_SRC) $(ABI_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(REF_SRC) -lm

# ------------------------------------------------------ the cpu library
# kernels/cpu: one object per file, each compiled with its ISA's flags by
# the file's suffix (_avx2.c, _avx512.c, _neon.c; no suffix: portable C).
# An ISA file guards its body with the target architecture, so the same
# list builds for x86-64 and, with CC=aarch64-linux-gnu-gcc, for arm64.
# The library also carries kernels/ops (schemas, decoders).
TARGET_ARCH_NAME := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq (,$(findstring x86_64,$(TARGET_ARCH_NAME)))
ISA_avx2   = -mavx2 -mfma -mf16c
ISA_avx512 = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
endif
ifneq (,$(findstring aarch64,$(TARGET_ARCH_NAME)))
ISA_neon   = -march=armv8.2-a+dotprod+fp16
endif
cpu_isa_flags = $(if $(findstring _avx512.c,$1),$(ISA_avx512),$(if $(findstring _avx2.c,$1),$(ISA_avx2),$(if $(findstring _neon.c,$1),$(ISA_neon))))
CPU_OPT  ?= -O3
CPU_SRC  := $(wildcard kernels/cpu/*.c)
CPU_OBJ  := $(CPU_SRC:%.c=$(BUILD)/obj/%.o)
CPU_SHARED_SRC := $(OPS_SRC) base/encoding.c
$(BUILD)/obj/kernels/cpu/%.o: kernels/cpu/%.c $(ABI_HEADERS) $(wildcard kernels/cpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(CPU_OPT) $(call cpu_isa_flags,$<) -c $< -o $@
$(BUILD)/plugins/kernels/cpu.so: $(CPU_OBJ) $(CPU_SHARED_SRC) $(ABI_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(CPU_OBJ) $(CPU_SHARED_SRC) -lm

# ------------------------------------------------------------------ tests

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libradcore.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -rdynamic -o $@ $< -Wl,--whole-archive $(BUILD)/libradcore.a -Wl,--no-whole-archive $(TESTLIBS)

$(BUILD)/tests/ops/%: tests/ops/%.c $(REF_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(filter-out base/encoding.c,$(REF_SRC)) base/encoding.c base/error.c $(TESTLIBS)

# The recording builder stands in for the core: it links no engine code but
# the metadata lookups (engine/meta.c), so plugins read metadata as they do in
# the engine.
$(BUILD)/tests/arch/%: tests/arch/%.c tests/arch/recording_builder.c engine/meta.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -rdynamic -o $@ $< tests/arch/recording_builder.c engine/meta.c base/error.c base/encoding.c $(TESTLIBS)

# Golden, tokenizer and real-model tests drive the core library directly.
# (The more specific unit/ops/arch rules above win: GNU make prefers the
# pattern with the shortest stem.)
$(BUILD)/tests/%: tests/%.c $(BUILD)/libradcore.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TEST_INC) -rdynamic -o $@ $< -Wl,--whole-archive $(BUILD)/libradcore.a -Wl,--no-whole-archive $(TESTLIBS)

TEST_ENV = RADIANCE_HOME=$(abspath $(BUILD)) RADIANCE_BIN=$(abspath $(BUILD)/radiance) RADIANCE_SRC=$(CURDIR)

unit-test: all $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done
ops-test: all $(OPS_TESTS)
	@for t in $(OPS_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done
arch-test: all $(ARCH_TESTS)
	@for t in $(ARCH_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done
golden-test: all $(GOLDEN_TESTS)
	@for t in $(GOLDEN_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done
text-test: all $(TEXT_TESTS)
	@for t in $(TEXT_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done
e2e-test: all
	@for t in tests/e2e/test_*.sh; do echo "== $$t"; $(TEST_ENV) bash $$t || exit 1; done

test: unit-test ops-test arch-test golden-test text-test e2e-test neon-test
	@echo "all test suites passed"

# The arm64 NEON kernels under qemu-user (make deps installs the cross
# compiler and qemu); skipped visibly without them, except in CI.
neon-test:
	@if command -v qemu-aarch64 >/dev/null && command -v $(NEON_CC) >/dev/null; then \
	    $(MAKE) --no-print-directory test-neon; \
	elif [ "$$CI" = true ]; then echo "neon-test: qemu-aarch64 or $(NEON_CC) missing (make deps)"; exit 1; \
	else echo "SKIP neon-test: qemu-aarch64 or $(NEON_CC) missing (make deps installs them)"; fi

# Real GGUF models shipped in Python packages, fetched once into a cache
# outside the repository (tests/models/fetch.sh), then read and run.
test-models: all $(MODEL_TESTS)
	bash tests/models/fetch.sh
	@for t in $(MODEL_TESTS); do echo "== $$t"; $(TEST_ENV) $$t || exit 1; done

# libFuzzer targets for the parsers, each for a bounded time.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 30
FUZZ_DIR    = $(BUILD)/fuzz
FUZZ_FLAGS  = -g -O1 -std=c11 -D_GNU_SOURCE -Ibase -Iformats $(WARN) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_GGUF_SRC = tests/fuzz/fuzz_gguf.c formats/gguf.c formats/file_access.c formats/tokenizer_gguf.c formats/tokenizer.c base/error.c base/encoding.c
FUZZ_ST_SRC   = tests/fuzz/fuzz_safetensors.c formats/safetensors.c base/error.c base/encoding.c
$(FUZZ_DIR)/fuzz_gguf: $(FUZZ_GGUF_SRC) tests/fuzz/fuzz_common.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(FUZZ_GGUF_SRC) -lutf8proc -lm
$(FUZZ_DIR)/fuzz_safetensors: $(FUZZ_ST_SRC) tests/fuzz/fuzz_common.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(FUZZ_ST_SRC) -ljansson
# The tokenizer targets need the whole core (regexes, NFC): link the library.
FUZZ_CORE_SRC = $(filter-out engine/%,$(CORE_SRC)) $(wildcard engine/text/*.c)
$(FUZZ_DIR)/fuzz_tokenizer_json $(FUZZ_DIR)/fuzz_encode: $(FUZZ_DIR)/%: tests/fuzz/%.c $(FUZZ_CORE_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iengine -o $@ $< $(FUZZ_CORE_SRC) -ljansson -lpcre2-8 -lutf8proc -lcrypto -lm
# The .rad reader, config.json, KV snapshot restore, the tokenizer blob and
# the reply parser reach into the engine (the metadata checks, the KV pool,
# engine/text): the whole core, built once for fuzzing
# (-fsanitize=fuzzer-no-link) into an archive each of those targets links.
FUZZ_LIB_OBJ = $(CORE_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_LIB_FLAGS = $(subst -fsanitize=fuzzer,-fsanitize=fuzzer-no-link,$(FUZZ_FLAGS))
$(FUZZ_DIR)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LIB_FLAGS) -Iengine -c $< -o $@
$(FUZZ_DIR)/libradcore.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_DIR)/fuzz_rad $(FUZZ_DIR)/fuzz_config $(FUZZ_DIR)/fuzz_snapshot $(FUZZ_DIR)/fuzz_tokenizer_blob $(FUZZ_DIR)/fuzz_reply: $(FUZZ_DIR)/%: tests/fuzz/%.c $(FUZZ_DIR)/libradcore.a tests/fuzz/fuzz_common.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iengine -o $@ $< $(FUZZ_DIR)/libradcore.a $(LDLIBS)

# Every target, for FUZZ_TIME seconds each (CI: 15), from the committed seeds
# (tests/fuzz/seeds/TARGET) and what earlier runs found (build/fuzz/corpus).
# `make fuzz FUZZ_TIME=600` is the longer campaign; what it adds to the
# corpus stays in build/ (copy a small, new finding into seeds/ by hand).
# tests/fuzz/run_fuzz.sh runs one target: a wall-clock timeout that does not
# reproduce in CPU time alone is a stall of a loaded or paused machine, not
# a finding, and fuzzing goes on.  A finding in one target does not stop the
# others: each is run, its summary printed, and the make fails at the end
# naming every target that found something.  UBSan is built with
# -fno-sanitize-recover, so a report is a crash with a reproducer.
FUZZ_TARGETS = gguf safetensors tokenizer_json encode rad config snapshot tokenizer_blob reply
.PHONY: fuzz
fuzz: fuzz-smoke
fuzz-smoke: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
	@fail=; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz_$$t, $(FUZZ_TIME) s"; \
	  bash tests/fuzz/run_fuzz.sh $(FUZZ_DIR) $$t $(FUZZ_TIME) || fail="$$fail $$t"; done; \
	[ -z "$$fail" ] || { echo "fuzz: findings in:$$fail (logs $(FUZZ_DIR)/fuzz_TARGET.log, reproducers $(FUZZ_DIR)/crash-TARGET-*)"; exit 1; }

# ------------------------------------------- unit-test plugin fixtures
# Deliberately broken plugins for tests/unit/test_plugin.c, built from
# tests/unit/plugins/*.c.  Each refusal case is its own plugin folder,
# $(BUILD)/tests/unit/plugins/<case>/{arch,kernels}/*.so, which the test
# finds through RADIANCE_HOME.  This block only adds rules and prerequisites;
# unit-test itself is defined above.
TP_DIR := $(BUILD)/tests/unit/plugins
TEST_PLUGINS := $(TP_DIR)/arch_bad_abi/arch/bad_abi.so \
    $(TP_DIR)/arch_no_step/arch/no_step.so \
    $(TP_DIR)/arch_duplicate/arch/dup_a.so $(TP_DIR)/arch_duplicate/arch/dup_b.so \
    $(TP_DIR)/kernels_bad_abi/kernels/bad_abi.so \
    $(TP_DIR)/kernels_no_export/kernels/no_export.so \
    $(TP_DIR)/kernels_old_row/kernels/old_row.so

$(TP_DIR)/arch_bad_abi/arch/bad_abi.so: tests/unit/plugins/arch_bad_abi.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $<
$(TP_DIR)/arch_no_step/arch/no_step.so: tests/unit/plugins/arch_no_step.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $<
$(TP_DIR)/arch_duplicate/arch/dup_%.so: tests/unit/plugins/arch_duplicate.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -DDUP_NS=dup_$* -o $@ $<
$(TP_DIR)/kernels_bad_abi/kernels/bad_abi.so: tests/unit/plugins/kernels_bad_abi.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $<
$(TP_DIR)/kernels_no_export/kernels/no_export.so: tests/unit/plugins/kernels_no_export.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $<
$(TP_DIR)/kernels_old_row/kernels/old_row.so: tests/unit/plugins/kernels_old_row.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $<

unit-test: $(TEST_PLUGINS)

# ------------------------------------------- app logic under unit test
# tests/unit/test_model_spec.c and test_hf_cache.c test pure app/ logic
# (model specs, choosing files, the Hugging Face cache layout), which the
# core library does not hold: those objects form libradapp.a, linked after
# the core.  This block only adds prerequisites and a per-target TESTLIBS;
# the unit tests' pattern rule above does the linking.
APP_LOGIC_OBJ := $(BUILD)/obj/app/models/model_spec.o $(BUILD)/obj/app/models/hf_cache.o \
    $(BUILD)/obj/app/models/safe_fs.o
APP_LOGIC_TESTS := $(BUILD)/tests/unit/test_model_spec $(BUILD)/tests/unit/test_hf_cache
# The session store (app/session_*.c): test_session_db, and the driver that
# tests/e2e/test_sessions.sh runs (writes, kills, a full disk, two writers).
APP_LOGIC_OBJ += $(BUILD)/obj/app/sessions/session_db.o $(BUILD)/obj/app/sessions/session_messages.o \
    $(BUILD)/obj/app/sessions/session_snapshots.o
APP_LOGIC_TESTS += $(BUILD)/tests/unit/test_session_db $(BUILD)/tests/e2e/session_driver
e2e-test: $(BUILD)/tests/e2e/session_driver
$(BUILD)/libradapp.a: $(APP_LOGIC_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(APP_LOGIC_TESTS): $(BUILD)/libradapp.a
$(APP_LOGIC_TESTS): TESTLIBS = $(BUILD)/libradapp.a -lcmocka $(LDLIBS)

# ------------------------------------------- quantizers under unit test
# tests/unit/test_quantize.c decodes what it quantizes with the reference
# decoders (kernels/ops/dequant*.c, not in the core library) and checks
# bytes against tests/ops/encoding_vectors.h.  The ops tests include their
# tests/ops/*.h parts.
QUANT_TEST_OBJ := $(BUILD)/obj/kernels/ops/dequant.o $(BUILD)/obj/kernels/ops/dequant_kquants.o
$(BUILD)/tests/unit/test_quantize: $(QUANT_TEST_OBJ) tests/ops/encoding_vectors.h
$(BUILD)/tests/unit/test_quantize: TESTLIBS = $(QUANT_TEST_OBJ) -lcmocka $(LDLIBS)
$(OPS_TESTS): $(wildcard tests/ops/*.h)

# ------------------------------------------- k-quant dots under ops test
# tests/ops/test_cpu_kquants.c calls the cpu library's k-quant kernels,
# which cpu.so hides, so it links their objects (each built with its ISA's
# flags by the cpu rule above), the CPUID probe, the quantizers that make
# its weights and the GGUF reader for real model rows.
KQ_TEST_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard kernels/cpu/dot_kquants*.c kernels/cpu/act_q8k*.c) \
    kernels/cpu/cpu_features.c formats/quantize.c formats/quantize_kquants.c formats/quantize_kref.c formats/quantize_mxfp4.c formats/gguf.c \
    formats/file_access.c)
$(BUILD)/tests/ops/test_cpu_kquants: $(KQ_TEST_OBJ) $(wildcard kernels/cpu/*.h)
$(BUILD)/tests/ops/test_cpu_kquants: TESTLIBS = $(KQ_TEST_OBJ) -lcmocka $(LDLIBS)

# ------------------------------------------------ cpu products under test
# tests/ops/test_cpu.c opens cpu.so and runs its matrix products against
# ref (linked in by the ops pattern rule) at every ISA level; it makes its
# weights with the converter's quantizers and runs a real pthread pool.  It
# is plain C (no cmocka) so the same file runs on arm64: `make test-neon`
# cross-builds cpu.so and the test with aarch64-linux-gnu-gcc into
# build/neon/ and runs them under qemu-user (Debian: gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user).
CPU_TEST_OBJ := $(BUILD)/obj/formats/quantize.o $(BUILD)/obj/formats/quantize_kquants.o \
    $(BUILD)/obj/formats/quantize_kref.o $(BUILD)/obj/formats/quantize_mxfp4.o
$(BUILD)/tests/ops/test_cpu: $(CPU_TEST_OBJ)
$(BUILD)/tests/ops/test_cpu: TESTLIBS = $(CPU_TEST_OBJ) -lpthread -ldl -lm
# tests/ops/test_invariance.c: every op, ref and cpu, each row against the
# same row computed alone (docs/OPS.md, batch and placement invariance).
$(BUILD)/tests/ops/test_invariance: $(CPU_TEST_OBJ)
$(BUILD)/tests/ops/test_invariance: TESTLIBS = $(CPU_TEST_OBJ) -lcmocka -lpthread -ldl -lm
# tests/ops/test_cpu_moe.c: the cpu expert products against ref and gemm_nt.
$(BUILD)/tests/ops/test_cpu_moe: $(CPU_TEST_OBJ)
$(BUILD)/tests/ops/test_cpu_moe: TESTLIBS = $(CPU_TEST_OBJ) -lcmocka -lpthread -ldl -lm
# tests/bench/moe_routing.c: routing statistics for docs/BENCHMARKS.md (tests/bench/bench_moe.py builds it).
$(BUILD)/tests/bench/moe_routing: tests/bench/moe_routing.c $(BUILD)/libradcore.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -rdynamic -o $@ $< -Wl,--whole-archive $(BUILD)/libradcore.a -Wl,--no-whole-archive $(LDLIBS)

NEON_BUILD ?= $(BUILD)/neon
NEON_CC    ?= aarch64-linux-gnu-gcc
NEON_SRC   := tests/ops/test_cpu.c $(filter-out base/encoding.c,$(REF_SRC)) base/encoding.c base/error.c \
    formats/quantize.c formats/quantize_kquants.c formats/quantize_kref.c formats/quantize_mxfp4.c
$(BUILD)/tests/ops/test_cpu_neon: $(NEON_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $(NEON_SRC) -lpthread -ldl -lm
# The other ops' test builds for arm64 against a small stand-in for cmocka.
NEON_OPS_SRC := tests/ops/test_cpu_ops.c $(filter-out base/encoding.c,$(REF_SRC)) base/encoding.c base/error.c
$(BUILD)/tests/ops/test_cpu_ops_neon: $(NEON_OPS_SRC) $(HEADERS) tests/ops/cmocka_lite/cmocka.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/ops/cmocka_lite -o $@ $(NEON_OPS_SRC) -lpthread -ldl -lm
NEON_INV_SRC := tests/ops/test_invariance.c $(filter-out base/encoding.c,$(REF_SRC)) base/encoding.c base/error.c \
    formats/quantize.c formats/quantize_kquants.c formats/quantize_kref.c formats/quantize_mxfp4.c
$(BUILD)/tests/ops/test_invariance_neon: $(NEON_INV_SRC) $(HEADERS) tests/ops/cmocka_lite/cmocka.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/ops/cmocka_lite -o $@ $(NEON_INV_SRC) -lpthread -ldl -lm
.PHONY: test-neon
test-neon:
	$(MAKE) BUILD=$(NEON_BUILD) CC=$(NEON_CC) $(NEON_BUILD)/plugins/kernels/cpu.so \
	    $(NEON_BUILD)/tests/ops/test_cpu_neon $(NEON_BUILD)/tests/ops/test_cpu_ops_neon \
	    $(NEON_BUILD)/tests/ops/test_invariance_neon
	qemu-aarch64 -L /usr/aarch64-linux-gnu $(NEON_BUILD)/tests/ops/test_cpu_neon $(NEON_BUILD)/plugins/kernels/cpu.so
	RADIANCE_HOME=$(abspath $(NEON_BUILD)) qemu-aarch64 -L /usr/aarch64-linux-gnu $(NEON_BUILD)/tests/ops/test_cpu_ops_neon
	RADIANCE_HOME=$(abspath $(NEON_BUILD)) qemu-aarch64 -L /usr/aarch64-linux-gnu $(NEON_BUILD)/tests/ops/test_invariance_neon quick

# tests/unit/test_alloc_fail.c fails the n-th allocation of the readers and
# the builder for every n: the link line routes the core's allocations
# through the test's __wrap_ functions (no hook in the code under test).
ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup,--wrap=vasprintf,--wrap=asprintf
$(BUILD)/tests/unit/test_alloc_fail: TESTLIBS = $(ALLOC_WRAP) -lcmocka $(LDLIBS)

# tests/unit/test_temp_names.c records the temporary files the cache, the
# tokenizer cache and the container writer create, through the same kind of
# link-line hook (getrandom, openat, mkostemp).
TEMP_WRAP := -Wl,--wrap=getrandom,--wrap=openat,--wrap=mkostemp
$(BUILD)/tests/unit/test_temp_names: $(BUILD)/libradapp.a
$(BUILD)/tests/unit/test_temp_names: TESTLIBS = $(TEMP_WRAP) $(BUILD)/libradapp.a -lcmocka $(LDLIBS)

# The TUI layout test includes the app's layout sources directly.
$(BUILD)/tests/unit/test_tui_layout: app/tui/tui_text.c app/tui/tui_markdown.c app/tui/tui_transcript.c app/term_safe.c

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    unit-test ops-test arch-test golden-test text-test e2e-test

# ---------------------------------------------------------------- install

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/radiance/plugins/arch \
	    $(DESTDIR)$(PREFIX)/lib/radiance/plugins/kernels $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/radiance $(DESTDIR)$(PREFIX)/bin/radiance
	install -m 644 $(ARCH_SO) $(DESTDIR)$(PREFIX)/lib/radiance/plugins/arch/
	install -m 644 $(KERN_SO) $(DESTDIR)$(PREFIX)/lib/radiance/plugins/kernels/
	install -m 644 man/radiance.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 644 $(wildcard man/*.5) $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(PREFIX)/share/radiance
	install -m 644 share/models.tsv $(DESTDIR)$(PREFIX)/share/radiance/
	install -D -m 644 share/completions/radiance.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/radiance
	install -D -m 644 share/completions/_radiance $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_radiance

# Debian packages named in the design; -dev for what we link or will link.
# deps: what building radiance and running it need, and tests/models/fetch.sh
# (pip fetches the real models that ship in Python packages).  test-deps:
# that and the test toolchain: cmocka, tmux and script(1) for the TUI tests,
# clang for the fuzz targets, the arm64 cross compiler and qemu-user for the
# NEON kernels, python3 for the fixtures, groff for the man-page check.
DEB_PACKAGES = build-essential pkg-config libjansson-dev libncurses-dev libreadline-dev \
    libcurl4-openssl-dev libsqlite3-dev libpcre2-dev libutf8proc-dev libmd4c-dev libmd4c-html0-dev \
    liburing-dev libzstd-dev libssl-dev ca-certificates python3 python3-pip
DEB_TEST_PACKAGES = libcmocka-dev tmux bsdutils clang gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
    groff-base

deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_PACKAGES)

test-deps: deps
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEB_TEST_PACKAGES)

clean:
	rm -rf build build-asan
