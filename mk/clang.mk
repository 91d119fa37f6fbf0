# clang.mk: keeping the clang build building (included by the Makefile: -include mk/*.mk).
#   make clang-check   every C file of the CPU build, tests and tools through clang's front
#                      end with the flags `make CC=clang` uses (no code generated, so
#                      seconds, not the minutes of a build): CI runs it. The whole clang
#                      build and its test run: `make test CC=clang` (README, "Performance").
#   make deps-clang    install clang and libomp-dev (scripts/deps.sh --clang; root)

ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

.PHONY: clang-check deps-clang

CLANG ?= clang
CLANG_CHECK_FLAGS = -std=c11 -D_GNU_SOURCE -march=native -fopenmp -fsyntax-only -Wall -Wextra -Werror \
                    -Wno-unused-function -ffp-contract=off -I. -I$(BLAS_INC) $(HDF5_CFLAGS) $(MPI_CFLAGS) -DS2HC_CUDA
CLANG_CHECK_SRC = harness/main.c $(LIB_SRC) $(TEST_SRC) $(wildcard tools/*.c) kernels/cuda/cuda_dl.c
CLANG_CHECK_DBL = $(DBL_SRC) $(DTEST_SRC)

clang-check:
	@command -v $(CLANG) >/dev/null || { echo "clang-check: $(CLANG) not found (make deps-clang)" >&2; exit 1; }
	@{ for f in $(CLANG_CHECK_SRC); do echo "$$f"; done; for f in $(CLANG_CHECK_DBL); do echo "-DS2HC_DOUBLE $$f"; done; } | \
	  xargs -P 2 -L 1 $(CLANG) $(CLANG_CHECK_FLAGS)
	@echo "clang-check: $(words $(CLANG_CHECK_SRC) $(CLANG_CHECK_DBL)) files through $$($(CLANG) --version | head -n 1)"

deps-clang:
	@scripts/deps.sh --clang
