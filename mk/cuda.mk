# mk/cuda.mk: the CUDA backend (kernels/cuda/*.cu) and its GPU check.
#
# Included by the main Makefile (`-include $(wildcard mk/*.mk)`), or standalone:
#   make -f mk/cuda.mk cuda-build      compile every .cu (zero warnings: -Werror), the archive,
#                                      the C probe and the check program build/cuda/gpu_check
#   make -f mk/cuda.mk cuda-probe      build and run the probe ("no GPU: ..." without one)
#   make -f mk/cuda.mk cuda-emu-check  the check's comparisons on a CPU emulator (no nvcc/GPU)
#   tests/gpu/check.sh                 build, then check against the CPU on a GPU
#
# For the main Makefile it defines (all empty when nvcc is not found):
#   CUDA_CFLAGS   -DS2HC_CUDA: model_cuda.h then declares the real API instead of stubs
#   CUDA_SO       build/cuda/libs2hc_cuda.so, the backend as bin/s2hc loads it when a
#                 command first asks for a GPU (kernels/cuda/cuda_dl.c)
#   CUDA_LIB      build/cuda/libs2hc_cuda.a, the same objects for the programs that link
#                 the backend itself (the probe and the GPU check)
#   CUDA_LIBS     the archive and what it needs: -lcublas -lcublasLt -lcudart -lstdc++,
#                 with -L and -rpath to the toolkit's library folder (CUDA_LIBDIR)
#   CUDA_OBJ      the archive's objects
# Targets: sm_90 machine code plus compute_90 PTX (Hopper and newer; see docs/cuda.md).
ifndef S2HC_CUDA_MK
S2HC_CUDA_MK := 1
_cuda_goal := $(.DEFAULT_GOAL)
_cuda_standalone := $(filter 1,$(words $(MAKEFILE_LIST)))

CC ?= gcc
ifeq ($(CC),cc)
CC := gcc
endif
# The C of the probe and the GPU check (their CPU reference, and the libgomp they carry in
# build/cuda/lib): GCC's, as nvcc's host compiler, whatever CC builds the programs.
CUDA_HOST_CC ?= gcc
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))

# One CUDA build for every flavour of the CPU build (build-san too): the archive is not
# instrumented anyway, and nvcc is the slow part.
CUDA_BUILD := build/cuda
CUDA_SRC   := $(wildcard kernels/cuda/*.cu)

# The CPU reference for the check programs: the model, the methods and kernels/cpu,
# compiled for any CPU of the architecture (no -march=native; x86-64-v2 on x86-64, the
# ARMv8-A baseline on aarch64 hosts such as Grace) so a binary built here runs on a GPU
# machine. OpenBLAS under the host's multiarch triplet.
CUDA_TRIPLET  := $(or $(shell $(CUDA_HOST_CC) -print-multiarch 2>/dev/null),x86_64-linux-gnu)
CUDA_BLAS_DIR ?= /usr/lib/$(CUDA_TRIPLET)/openblas-openmp
CUDA_BLAS_INC ?= /usr/include/$(CUDA_TRIPLET)/openblas-openmp
CUDA_CPU_MARCH := $(if $(filter x86_64-%,$(CUDA_TRIPLET)),-march=x86-64-v2)
CUDA_CPU_SRC  := harness/model.c harness/util.c harness/optim.c harness/config.c harness/presets.c \
                 $(wildcard harness/residual/*.c) $(wildcard kernels/cpu/*.c)
CUDA_CPU_OBJ  := $(CUDA_CPU_SRC:%.c=$(CUDA_BUILD)/cpu/%.o)
CUDA_CPU_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 $(CUDA_CPU_MARCH) -fopenmp -Wall -Wextra -Werror \
                   -Wno-unused-function -Wno-format-truncation -Wno-psabi -I. -I$(CUDA_BLAS_INC) -MMD -MP

$(CUDA_BUILD)/cpu/%.o: %.c
	@mkdir -p $(dir $@)
	$(CUDA_HOST_CC) $(CUDA_CPU_CFLAGS) -c -o $@ $<


# The CPU emulator (tests/gpu/emu): the .cu files turned into C++ by cu2cpp.py and run
# with fibers for CUDA threads. No nvcc and no GPU needed: it checks the device code's
# arithmetic, indexing, plumbing and (in its several orders) barriers against the CPU
# here, slowly; not its speed.
EMU_BUILD := $(CUDA_BUILD)/emu
EMU_CU    := $(CUDA_SRC) tests/gpu/check.cu
EMU_OBJ   := $(EMU_CU:%.cu=$(EMU_BUILD)/%.o) $(EMU_BUILD)/emu.o
CXX ?= g++
# -fPIC: the same objects make the emulated backend library (EMU_SO); initial-exec TLS:
# the kernels read the thread-locals threadIdx, blockIdx, ... all the time, and through
# __tls_get_addr (a loaded library's default) the emulator ran 4x slower. A program that
# loads EMU_SO then needs GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4194304 (docs/cuda.md).
EMU_CXXFLAGS := -std=c++17 -O2 -fopenmp -fPIC -fno-semantic-interposition -ftls-model=initial-exec -Itests/gpu/emu -I. -D__CUDACC__ -D__host__= -D__device__= \
                -Wall -Wextra -Werror -Wno-unused-function -Wno-format-truncation -Wno-unknown-pragmas -MMD -MP

# The generated .cpp files are intermediate (reached through two pattern rules): kept.
.SECONDARY: $(EMU_CU:%.cu=$(EMU_BUILD)/%.cpp) $(EMU_BUILD)/tests/gpu/emu/selftest.cpp
$(EMU_BUILD)/%.cpp: %.cu tests/gpu/emu/cu2cpp.py
	@mkdir -p $(dir $@)
	python3 tests/gpu/emu/cu2cpp.py $< $@

# flags_stamp FILE,FLAGS: FILE holds FLAGS, rewritten (so newer than the objects that
# depend on it, which are then rebuilt) only when they change
flags_stamp = $(if $(filter clean deps,$(MAKECMDGOALS)),,$(shell mkdir -p $(dir $1) && \
  { [ "$$(cat $1 2>/dev/null)" = '$(strip $2)' ] || echo '$(strip $2)' > $1; }))
EMU_STAMP := $(EMU_BUILD)/cxx.flags
$(call flags_stamp,$(EMU_STAMP),$(EMU_CXXFLAGS))
$(EMU_BUILD)/%.o: $(EMU_BUILD)/%.cpp $(EMU_STAMP)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<

$(EMU_BUILD)/emu.o: tests/gpu/emu/emu.cpp $(EMU_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<

$(EMU_BUILD)/gpu_check_emu: $(EMU_OBJ) $(CUDA_CPU_OBJ)
	$(CXX) -fopenmp -o $@ $^ -L$(CUDA_BLAS_DIR) -Wl,-rpath,$(CUDA_BLAS_DIR) -lopenblas -lyaml -lm

# The backend library on the emulator: bin/s2hc with S2HC_CUDA_LIB naming it runs the cuda
# backend's whole training path without a GPU, through the same loader (kernels/cuda/
# cuda_dl.c) as on a GPU (tests/cli/cuda_train_emu.sh).
EMU_SO := $(EMU_BUILD)/libs2hc_cuda_emu.so
$(EMU_SO): $(CUDA_SRC:%.cu=$(EMU_BUILD)/%.o) $(EMU_BUILD)/emu.o
	$(CXX) -shared -fopenmp -Wl,-Bsymbolic -o $@ $^

# The emulator's own check (tests/cli/emu_check.sh, part of make test): kernels with and
# without the barriers they need, and the rules it enforces.
$(EMU_BUILD)/emu_selftest: $(EMU_BUILD)/tests/gpu/emu/selftest.o $(EMU_BUILD)/emu.o
	$(CXX) -fopenmp -o $@ $^

# The check on the emulator, without the timing and with fewer bf16 / training cases
# (--quick), once in each of the emulator's orders (EMU_ORDERS; tests/gpu/emu/emu.h): the
# comparisons pass in all of them only if the kernels' barriers order every exchange.
# About 1-1.3 minutes per order on 2 idle cores. Drop --quick for all of it.
EMU_ORDERS ?= asc desc random:1 random:2
cuda-emu-check: $(EMU_BUILD)/gpu_check_emu
	@set -e; for o in $(EMU_ORDERS); do \
	  echo "== S2HC_EMU_ORDER=$$o"; \
	  S2HC_EMU_ORDER=$$o OPENBLAS_CORETYPE=$${OPENBLAS_CORETYPE:-$$(grep -q avx512f /proc/cpuinfo && echo SkylakeX)} \
	    $< --no-bench --quick; \
	done

-include $(wildcard $(EMU_BUILD)/*/*/*/*.d $(EMU_BUILD)/*/*/*.d $(EMU_BUILD)/*/*.d $(EMU_BUILD)/*.d)

# A cross build of the CPU program (the Makefile's CROSS: CC for another architecture):
# no backend, nvcc and the emulator being the host's.
ifeq ($(CROSS),1)
$(info CUDA backend skipped: a cross build for $(TRIPLET))
override NVCC :=
endif

# The toolkit's root and library folder. nvcc may be a wrapper script elsewhere on PATH
# (/usr/local/bin/nvcc exec'ing the real one), so ask nvcc itself for its TOP, and look
# for the libraries where toolkits put them: lib64, or targets/<arch>/lib.
ifneq ($(strip $(NVCC)),)
ifneq ($(origin CUDA_HOME),command line)
CUDA_HOME := $(or $(realpath $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | \
                 sed -n 's/^#\$$ TOP=//p' | head -n 1)),$(patsubst %/bin/nvcc,%,$(realpath $(NVCC))))
endif
CUDA_LIBDIR ?= $(firstword $(foreach d,lib64 targets/x86_64-linux/lib targets/sbsa-linux/lib targets/aarch64-linux/lib lib,\
                 $(if $(wildcard $(CUDA_HOME)/$(d)/libcublas.so),$(CUDA_HOME)/$(d))))
ifeq ($(strip $(CUDA_LIBDIR)),)
$(info CUDA backend skipped: nvcc is $(NVCC), but no libcublas.so under $(CUDA_HOME))
override NVCC :=
endif
else ifneq ($(CROSS),1)
$(info CUDA backend skipped: nvcc not found)
endif

ifeq ($(strip $(NVCC)),)
CUDA_CFLAGS :=
CUDA_SO     :=
CUDA_LIB    :=
CUDA_LIBS   :=
CUDA_OBJ    :=
cuda-build cuda-probe cuda-check-build:
	@:
else
CUDA_ARCH  ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# -fPIC: the same objects go into the archive and the shared library
NVCCFLAGS  ?= -std=c++17 -O3 $(CUDA_ARCH) -I. --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror,-fPIC
CUDA_OBJ   := $(CUDA_SRC:kernels/cuda/%.cu=$(CUDA_BUILD)/%.o)
CUDA_SO    := $(CUDA_BUILD)/libs2hc_cuda.so
CUDA_LIB   := $(CUDA_BUILD)/libs2hc_cuda.a
CUDA_CFLAGS := -DS2HC_CUDA
CUDA_LIBS  := $(CUDA_LIB) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcublasLt -lcudart -lstdc++ -lm

# The objects are rebuilt when NVCCFLAGS change (as -fPIC was added).
CUDA_STAMP := $(CUDA_BUILD)/nvcc.flags
$(call flags_stamp,$(CUDA_STAMP),$(NVCCFLAGS))
$(CUDA_BUILD)/%.o: kernels/cuda/%.cu $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(CUDA_LIB): $(CUDA_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -Bsymbolic: the library's calls of its own functions stay inside it, whatever the
# program that loads it defines under the same names (cuda_dl.c's wrappers)
$(CUDA_SO): $(CUDA_OBJ)
	$(CXX) -shared -Wl,-Bsymbolic -Wl,-soname,libs2hc_cuda.so -o $@ $^ \
	  -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcublasLt -lcudart -lm

# The C probe: gcc, the archive and the CUDA libraries only.
$(CUDA_BUILD)/cuda_probe: tests/gpu/probe.c $(CUDA_LIB)
	$(CUDA_HOST_CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -DS2HC_CUDA -I. -o $@ $< $(CUDA_LIBS)

# The check program. It carries its own copy of the CPU reference, compiled for any
# x86-64 (no -march=native) and linked with static OpenBLAS and libyaml, plus the few
# shared libraries the GPU machine may lack in build/cuda/lib (found through $ORIGIN):
# build here, carry build/cuda to a GPU machine, run tests/gpu/check.sh there.
CUDA_CHECK_LIBS := -L$(CUDA_BLAS_DIR) -Wl,-Bstatic -lopenblas -lyaml -Wl,-Bdynamic -lgfortran -lm \
                   -L$(CUDA_LIBDIR) -lcublas -lcublasLt -lcudart_static -ldl -lrt -lpthread -lstdc++ \
                   -Wl,-rpath,'$$ORIGIN/lib' -Wl,-rpath,$(CUDA_LIBDIR)
CUDA_CHECK_SHLIBS := libgfortran.so.5 libquadmath.so.0 libgomp.so.1

$(CUDA_BUILD)/check.o: tests/gpu/check.cu $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(CUDA_BUILD)/gpu_check: $(CUDA_BUILD)/check.o $(CUDA_CPU_OBJ) $(CUDA_LIB)
	@mkdir -p $(CUDA_BUILD)/lib
	@for l in $(CUDA_CHECK_SHLIBS); do \
	  p=$$($(CUDA_HOST_CC) -print-file-name=$$l); \
	  case $$p in /*) cp -L $$p $(CUDA_BUILD)/lib/$$l;; *) p=$$(ldconfig -p | awk -v l=$$l '$$1 == l {print $$NF; exit}'); \
	    [ -n "$$p" ] && cp -L $$p $(CUDA_BUILD)/lib/$$l || true;; esac; \
	done
	$(CUDA_HOST_CC) -fopenmp -o $@ $(CUDA_BUILD)/check.o $(CUDA_CPU_OBJ) $(CUDA_LIB) $(CUDA_CHECK_LIBS)

# What gpu_check was built from: every source file its objects' dependency lists name, with
# its sha256, in build/cuda/lib (which travels with the binary to a GPU machine). There
# tests/gpu/check.sh checks them against the tree beside it: a binary linked before the
# last edit checks other code than the tree's, and would still say "ok".
CUDA_CHECK_STAMP := $(CUDA_BUILD)/lib/sources.sha256
$(CUDA_CHECK_STAMP): $(CUDA_BUILD)/gpu_check
	@sed -e 's/\\$$//' -e 's/^[^:]*://' $(CUDA_BUILD)/check.d $(CUDA_OBJ:.o=.d) $(CUDA_CPU_OBJ:.o=.d) | tr ' ' '\n' | \
	  grep -E '^[^/].*\.(c|h|cu|cuh)$$' | xargs realpath -s --relative-to=. | LC_ALL=C sort -u | xargs sha256sum > $@.tmp
	@mv $@.tmp $@

cuda-build: $(CUDA_LIB) $(CUDA_SO) $(CUDA_BUILD)/cuda_probe $(CUDA_BUILD)/gpu_check $(CUDA_CHECK_STAMP)
cuda-check-build: $(CUDA_BUILD)/gpu_check $(CUDA_BUILD)/cuda_probe $(CUDA_CHECK_STAMP)
cuda-probe: $(CUDA_BUILD)/cuda_probe
	$(CUDA_BUILD)/cuda_probe

-include $(wildcard $(CUDA_BUILD)/*.d)
endif
-include $(wildcard $(CUDA_BUILD)/cpu/*/*.d $(CUDA_BUILD)/cpu/*/*/*.d)

.PHONY: cuda-build cuda-probe cuda-check-build cuda-emu-check

# Keep the including Makefile's default goal (`all`); standalone, build the backend.
ifeq ($(_cuda_goal),)
ifeq ($(_cuda_standalone),1)
.DEFAULT_GOAL := cuda-build
else
.DEFAULT_GOAL :=
endif
else
.DEFAULT_GOAL := $(_cuda_goal)
endif
endif
