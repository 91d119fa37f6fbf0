# s2hc: build, test, data, paper, bench.
#   make              build bin/s2hc (CPU always; the CUDA backend too when nvcc is found)
#   make deps         install the Debian packages the project needs (idempotent)
#   make test         build and run the whole test suite
#   make test SAN=1   the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make coverage     the suite with gcov's counters (COVERAGE=1): lines run per C file
#   make paper        deps, build, data, train (see README)
CC      ?= gcc
ifeq ($(CC),cc)
CC := gcc
endif
SAN     ?= 0
COVERAGE ?= 0
ifeq ($(SAN)$(COVERAGE),11)
$(error SAN=1 and COVERAGE=1 are separate builds: give one)
endif
# The target: its multiarch triplet (x86_64-linux-gnu, aarch64-linux-gnu), where Debian
# keeps OpenBLAS's flavours. A cross build (a CC for another architecture than this
# machine's, e.g. CC=aarch64-linux-gnu-gcc SYSROOT=/path/to/an/arm64/root) has a build
# folder of its own (build-<triplet>, its program there too), no -march=native (OPT: the
# architecture's baseline unless given) and no CUDA backend (mk/cuda.mk); its programs run
# under an emulator (tests/run.sh, S2HC_EXEC; README, "Other CPUs").
TRIPLET := $(or $(shell $(CC) -print-multiarch 2>/dev/null),$(shell $(CC) -dumpmachine 2>/dev/null | sed 's/-[^-]*-linux/-linux/'),x86_64-linux-gnu)
CROSS   := $(if $(filter $(shell uname -m)-%,$(TRIPLET)),,1)
SYSROOT ?=
ifeq ($(CROSS),1)
OPT     ?= -O2
endif
# The sanitizer build at -O1 (AddressSanitizer's advice for a usable speed): it compiles
# in half the time of -O2 (the frame's kernels, kernels/cpu/hc_frame.c, take minutes
# under UBSan there) and its suite runs ~10 % longer (docs/performance.md, log item 34).
ifeq ($(SAN),1)
OPT     ?= -O1 -march=native
endif
# The coverage build at -O0: every line of the source keeps its own code, so gcov's
# counts are the lines' own (at -O2 inlined and merged code counts elsewhere).
ifeq ($(COVERAGE),1)
OPT     ?= -O0 -march=native
endif
OPT     ?= -O2 -march=native
# BLAS_DIR as the programs find it at run time (their RPATH); the linker and the compiler
# look under SYSROOT.
BLAS_DIR := /usr/lib/$(TRIPLET)/openblas-openmp
BLAS_INC := $(SYSROOT)/usr/include/$(TRIPLET)/openblas-openmp
ifneq ($(SYSROOT),)
PKG_CONFIG := PKG_CONFIG_LIBDIR=$(SYSROOT)/usr/lib/$(TRIPLET)/pkgconfig:$(SYSROOT)/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$(SYSROOT) pkg-config
else
PKG_CONFIG := pkg-config
endif
# hdf5.pc is an alternative (dpkg's link to the serial or an MPI flavour): else the serial one
HDF5_PC     := $(or $(shell $(PKG_CONFIG) --exists hdf5 2>/dev/null && echo hdf5),hdf5-serial)
HDF5_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(HDF5_PC) 2>/dev/null)
HDF5_LIBS   := $(shell $(PKG_CONFIG) --libs $(HDF5_PC) 2>/dev/null)
YAML_LIBS   := $(shell $(PKG_CONFIG) --libs yaml-0.1 2>/dev/null || echo -lyaml)

# clang builds it too (CC=clang; its OpenMP runtime from libomp-dev): with GCC's -std=c11
# default of no FMA contraction spelt out, without GCC's warning names, and with `omp simd`
# a hint where clang cannot vectorise a loop (the double build).
CC_IS_CLANG := $(shell $(CC) --version 2>/dev/null | grep -q clang && echo 1)
ifeq ($(CC_IS_CLANG),1)
CC_FLAGS := -ffp-contract=off -Wno-pass-failed
else
# -Wno-psabi: on x86-64 without AVX (-march=x86-64) GCC notes at every function taking a
# 32-byte vector (cpu_math.h) that the ABI for passing it changed in GCC 4.6; they are
# all static inline, no call crosses an ABI
CC_FLAGS := -Wno-format-truncation -Wno-psabi
endif
SYSROOT_FLAGS := $(if $(SYSROOT),--sysroot=$(SYSROOT))
CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) $(SYSROOT_FLAGS) -fopenmp -Wall -Wextra -Werror -Wno-unused-function $(CC_FLAGS) \
           -I. -I$(BLAS_INC) $(HDF5_CFLAGS) -MMD -MP
LDFLAGS := $(SYSROOT_FLAGS) -fopenmp -L$(SYSROOT)$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR)
LDLIBS  := -lopenblas $(HDF5_LIBS) $(YAML_LIBS) -lm

# A path as one shell word, whatever it holds (a checkout under /home/o'brien or a folder
# with spaces): single-quoted, each ' as '\''. cstr: the text of a C string literal.
shq  = '$(subst ','\'',$(1))'
cstr = $(subst ",\",$(subst \,\\,$(1)))

BUILD := build
ifeq ($(CROSS),1)
BUILD := build-$(TRIPLET)
endif
ifeq ($(SAN),1)
BUILD := $(BUILD:build%=build-san%)
# -g1: line tables, all a sanitizer's report needs (file and line of every frame);
# -g's variable locations made harness/model.c compile 116 s instead of 88 here.
# float-cast-overflow (a double out of an integer's range cast to it) is not part of
# GCC's `undefined`: numbers read from files reach such casts.
SAN_CHECKS := address,undefined,float-cast-overflow
CFLAGS  += -fsanitize=$(SAN_CHECKS) -fno-omit-frame-pointer -fno-sanitize-recover=undefined,float-cast-overflow -g1
LDFLAGS += -fsanitize=$(SAN_CHECKS)
endif

# COVERAGE=1: everything built with gcov's counters (--coverage) in a folder of its own,
# build-cov (its program build-cov/s2hc); each run of a program adds to the .gcda files
# beside its objects. `make coverage` runs the suite so and prints the lines and functions
# each C file of the library ran (tests/coverage.py; README, "Two commands").
ifeq ($(COVERAGE),1)
BUILD := $(BUILD:build%=build-cov%)
CFLAGS  += --coverage
LDFLAGS += --coverage
endif

# The compiler that built the objects, and its code generation flags: after a build by
# another CC (make CC=clang after a gcc build) or with other OPT (make OPT='-O2
# -march=x86-64' for a portable binary, after a -march=native one) every object compiles
# again rather than the two being linked together.
CC_ID    := $(shell $(CC) --version 2>/dev/null | head -n 1) $(strip $(OPT))
CC_STAMP := $(BUILD)/cc.id
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(CC_STAMP) 2>/dev/null)" = '$(CC_ID)' ] || echo '$(CC_ID)' > $(CC_STAMP); })
endif
# clang's OpenMP runtime is libomp, OpenBLAS's libgomp: two runtimes in one process count
# and bind threads each on its own (under OMP_PROC_BIND libgomp binds the first thread as
# it loads, and libomp then counts one CPU). libomp implements libgomp's interface, so the
# programs find it under libgomp's name first ($(BUILD)/omp, an RPATH, which unlike a
# RUNPATH also serves the libraries' own dependencies): one runtime for both.
ifeq ($(CC_IS_CLANG),1)
OMP_SHIM := $(abspath $(BUILD))/omp
OMP_LIB  := $(shell $(CC) -print-file-name=libomp.so.5)
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
$(shell mkdir -p $(call shq,$(OMP_SHIM)) && ln -sfn $(call shq,$(OMP_LIB)) $(call shq,$(OMP_SHIM)/libgomp.so.1))
endif
LDFLAGS += -Wl,--disable-new-dtags -Wl,-rpath,$(call shq,$(OMP_SHIM))
endif

# Every C file of the library: the harness (minus main), residual methods, CPU kernels,
# probes and analysis tools.
LIB_SRC  := $(filter-out harness/main.c,$(wildcard harness/*.c)) $(wildcard harness/residual/*.c) \
            $(wildcard kernels/cpu/*.c) $(wildcard probes/*.c) $(wildcard analysis/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
# The numerical core built again in double precision for the gradient checks.
DBL_SRC  := harness/model.c harness/util.c $(wildcard harness/residual/*.c) $(wildcard kernels/cpu/*.c)
DBL_OBJ  := $(DBL_SRC:%.c=$(BUILD)/dbl/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
DTEST_SRC := $(wildcard tests/dbl_*.c)
DTEST_BIN := $(DTEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_OBJ  := $(TEST_BIN:%=%.o)
DTEST_OBJ := $(DTEST_BIN:%=%.o)

BIN := bin/s2hc
ifneq ($(SAN)$(CROSS)$(COVERAGE),00)
BIN := $(BUILD)/s2hc
endif

# Objects reached only through pattern rules are "intermediate" to make, which deletes
# them after a build: keep them. (A bare `.SECONDARY:` would keep everything, but it
# also makes every missing file intermediate, which make then does not rebuild: FORCE,
# a grid's index.csv after a preset switch. tests/cli/build.sh checks both.)
.SECONDARY: $(DBL_OBJ) $(LIB_OBJ) $(BUILD)/harness/main.o $(TEST_OBJ) $(DTEST_OBJ)
# AdamW's square roots in vector code (kernels/cpu/vecops.c says why)
$(BUILD)/kernels/cpu/vecops.o $(BUILD)/dbl/kernels/cpu/vecops.o: CFLAGS += -fno-math-errno
.PHONY: all deps test test-san coverage clean data tests-build
all: $(BIN)

$(BIN): $(BUILD)/harness/main.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/harness/main.o $(LIB_OBJ) $(LDLIBS)

$(BUILD)/%.o: %.c $(CC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The build's git commit, compiled into version.o only. The commit is written to a stamp
# file when it differs from the one there, and version.o depends on the stamp: it is
# rebuilt when the commit changes (or the tree turns dirty), and not on every make, which
# would relink every binary and recompile model.c into test_frame each time.
GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
VERSION_STAMP := $(BUILD)/harness/version.commit
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD)/harness && { [ "$$(cat $(VERSION_STAMP) 2>/dev/null)" = '$(GIT_COMMIT)' ] || echo '$(GIT_COMMIT)' > $(VERSION_STAMP); })
endif
$(BUILD)/harness/version.o: harness/version.c $(VERSION_STAMP) $(CC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DS2HC_GIT='"$(GIT_COMMIT)"' -DS2HC_OPT=$(call shq,"$(call cstr,$(strip $(OPT)))") -c -o $@ $<
FORCE:

$(BUILD)/dbl/%.o: %.c $(CC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DS2HC_DOUBLE -c -o $@ $<

# Each test compiles to its own object, then links: a new commit (version.o) or a change
# to the library relinks the tests without compiling them again.
$(DTEST_OBJ): CFLAGS += -DS2HC_DOUBLE
$(TEST_BIN): %: %.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

# In the sanitizer build, the objects that take a minute or more to compile at -O1 under
# the sanitizers (kernels/hc_math.h's vector code inlined many times over) and whose code
# runs for seconds in the suite compile at -O0: frame_bench (it includes model.c) 91 s of
# CPU against 23, test_variants 62 against 3 (its run 1.7 -> 4.6 s), bench.o 59 against
# 2.5 (bench_cli.sh's time the same), and the double-precision model.o 82 against 15
# (dbl_model's run 9.6 -> 15.4 s), measured with the frame's kernels in model.c: their
# file now, kernels/cpu/hc_frame.c, compiles so too.
ifeq ($(SAN),1)
$(BUILD)/tools/frame_bench.o $(BUILD)/tests/test_variants.o $(BUILD)/harness/bench.o \
  $(BUILD)/dbl/harness/model.o $(BUILD)/dbl/kernels/cpu/hc_frame.o: CFLAGS += -O0
endif

# tools/frame_bench.c includes harness/model.c to reach its static frame regions, so it
# links everything but model.o (mk/bench.mk).
LIB_OBJ_NO_MODEL := $(filter-out $(BUILD)/harness/model.o,$(LIB_OBJ))

$(DTEST_BIN): %: %.o $(DBL_OBJ)
	$(CC) $(LDFLAGS) -o $@ $< $(DBL_OBJ) $(LDLIBS)

tests-build: $(BIN) $(TEST_BIN) $(DTEST_BIN)

deps:
	@scripts/deps.sh

# A cross build's tests run under an emulator (tests/run.sh's S2HC_EXEC): user-mode QEMU
# for the target's architecture with the sysroot's libraries, unless EXEC names another.
# TESTS: only these tests (tests/run.sh's names: make test TESTS='test_config train_cli.sh').
ifeq ($(CROSS),1)
EXEC ?= env $(if $(SYSROOT),QEMU_LD_PREFIX=$(SYSROOT) )qemu-$(firstword $(subst -, ,$(TRIPLET)))
endif
test: tests-build
	@BUILD=$(BUILD) S2HC_BIN=$(call shq,$(abspath $(BIN))) S2HC_EXEC=$(call shq,$(EXEC)) tests/run.sh$(if $(strip $(TESTS)), $(TESTS))

test-san:
	@$(MAKE) --no-print-directory test SAN=1

# The suite in the coverage build, from zeroed counters, then the summary: lines and
# functions run per file of harness/, analysis/, probes/ and kernels/cpu/ and per folder,
# the union over every object that compiles a file (the double-precision ones too).
# tests/coverage.py FILE... lists a file's lines never run. Exits non-zero when a test
# failed (the summary printed all the same). TESTS as for make test.
coverage:
	@$(MAKE) --no-print-directory tests-build COVERAGE=1
	@find build-cov -name '*.gcda' -delete
	@$(MAKE) --no-print-directory test COVERAGE=1; rc=$$?; tests/coverage.py --build build-cov; exit $$rc

data: $(BIN)
	$(BIN) data prepare

clean:
	rm -rf build build-san build-cov build-*-linux-* build-san-*-linux-* build-cov-*-linux-* bin

# Training across processes (harness/dist.c) when OpenMPI's development files are
# installed (make deps); without them, or in the sanitizer build (OpenMPI's own
# allocations are not ours to sanitize), one process. A stamp of the flags rebuilds
# dist.o when they change (MPI installed after a first build).
ifneq ($(SAN),1)
MPI_CFLAGS := $(shell $(PKG_CONFIG) --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell $(PKG_CONFIG) --libs ompi-c 2>/dev/null)
endif
ifneq ($(MPI_LIBS),)
MPI_CFLAGS += -DS2HC_MPI
LDLIBS += $(MPI_LIBS)
endif
MPI_STAMP := $(BUILD)/harness/mpi.flags
ifeq ($(filter clean deps,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD)/harness && { [ -f $(MPI_STAMP) ] && [ "$$(cat $(MPI_STAMP))" = '$(strip $(MPI_CFLAGS))' ] || echo '$(strip $(MPI_CFLAGS))' > $(MPI_STAMP); })
endif
$(BUILD)/harness/dist.o: harness/dist.c $(MPI_STAMP) $(CC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c -o $@ $<

# Optional fragments: the CUDA backend (mk/cuda.mk), local Slurm checks (mk/grid.mk), ...
-include $(wildcard mk/*.mk)
# Link the CUDA backend when mk/cuda.mk found nvcc (the variables are empty otherwise).
# The sanitizer build stays CPU-only: the CUDA runtime is not built for ASan/LSan.
# The programs link kernels/cuda/cuda_dl.c, which loads the backend (build/cuda/
# libs2hc_cuda.so, with cuBLAS) when a command first asks for a GPU: cuBLAS's start-up
# costs every process ~0.35 s (docs/cuda.md, "Build").
# The tests also build the backend's library on the CPU emulator (tests/gpu/emu,
# mk/cuda.mk): bin/s2hc with S2HC_CUDA_LIB naming it runs the cuda backend's whole
# training path without a GPU, slowly (tests/cli/cuda_train_emu.sh).
ifneq ($(SAN),1)
CFLAGS += $(CUDA_CFLAGS)
ifneq ($(CUDA_CFLAGS),)
CUDA_DL_OBJ := $(BUILD)/kernels/cuda/cuda_dl.o
$(CUDA_DL_OBJ): CFLAGS += -DS2HC_CUDA_SO=$(call shq,"$(call cstr,$(abspath $(CUDA_SO)))")
LDLIBS := $(CUDA_DL_OBJ) $(LDLIBS)
$(BIN) $(TEST_BIN) $(DTEST_BIN) $(FRAME_BENCH): $(CUDA_DL_OBJ) | $(CUDA_SO)
tests-build: $(EMU_SO)
endif
endif
-include $(shell find $(sort build build-san $(BUILD)) -name '*.d' 2>/dev/null)
