# cross.mk: keeping the build building for other CPUs (included by the Makefile:
# -include mk/*.mk). The default build is -march=native on x86-64; the code also builds
# for aarch64 (Grace, Graviton, Linux on Apple silicon) and for x86-64 CPUs without AVX,
# in its generic vector code (README, "Other CPUs").
#   make cross-check   every C file of the CPU build, tests and tools compiled (-O0, no
#                      output kept: the ISA's code generation runs, its always_inline
#                      intrinsics and ABI warnings included, in seconds rather than the
#                      minutes of an -O2 build) for x86-64 without AVX (-march=x86-64,
#                      host headers) and for aarch64 (aarch64-linux-gnu-gcc, the
#                      libraries' headers from the host: LP64 on both); CI runs it. The
#                      whole aarch64 build and its tests under QEMU: README, "Other CPUs".
#   make deps-cross    install the cross compiler (scripts/deps.sh --cross; root)

ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

.PHONY: cross-check deps-cross

CROSS_CC ?= aarch64-linux-gnu-gcc
HOST_CC  ?= gcc
# The libraries' headers (hdf5, yaml, cblas) from the host, for the cross compiler after
# its own libc's.
HOST_TRIPLET := $(or $(shell $(HOST_CC) -print-multiarch 2>/dev/null),x86_64-linux-gnu)
HOST_INC := /usr/include/$(HOST_TRIPLET)/openblas-openmp $(patsubst -I%,%,$(shell pkg-config --cflags-only-I hdf5-serial 2>/dev/null))
# The build's flags (GCC's warnings as the Makefile sets them, CC_FLAGS) at -O0.
CROSS_CHECK_FLAGS = -std=c11 -D_GNU_SOURCE -O0 -fopenmp -Wall -Wextra -Werror -Wno-unused-function \
                    $(CC_FLAGS) -DS2HC_CUDA -I. -c -o /dev/null
CROSS_CHECK_X86   = $(HOST_CC) -march=x86-64 $(CROSS_CHECK_FLAGS) $(addprefix -I,$(HOST_INC))
CROSS_CHECK_ARM   = $(CROSS_CC) $(CROSS_CHECK_FLAGS) $(addprefix -idirafter ,$(HOST_INC) /usr/include)
CROSS_CHECK_SRC = harness/main.c $(LIB_SRC) $(TEST_SRC) $(wildcard tools/*.c) kernels/cuda/cuda_dl.c
CROSS_CHECK_DBL = $(DBL_SRC) $(DTEST_SRC)

cross-check:
	@command -v $(CROSS_CC) >/dev/null || { echo "cross-check: $(CROSS_CC) not found (make deps-cross)" >&2; exit 1; }
	@{ for f in $(CROSS_CHECK_SRC); do echo "$$f"; done; for f in $(CROSS_CHECK_DBL); do echo "-DS2HC_DOUBLE $$f"; done; } | \
	  while read -r f; do echo "$(CROSS_CHECK_X86) $$f"; echo "$(CROSS_CHECK_ARM) $$f"; done | xargs -P 2 -L 1 sh -c '"$$@"' sh
	@echo "cross-check: $(words $(CROSS_CHECK_SRC) $(CROSS_CHECK_DBL)) files for x86-64 without AVX ($(HOST_CC) -march=x86-64) and for aarch64 ($$($(CROSS_CC) --version | head -n 1))"

deps-cross:
	@scripts/deps.sh --cross
