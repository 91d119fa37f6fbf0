# mk/bench.mk: `make bench`, training speed measured against the machine's limit.
#
#   make bench                        build, then bin/s2hc bench (CSV under out/bench/)
#   make bench BENCH_ARGS=--quick     the short version (about a minute on 2 cores)
#   make bench BENCH_ARGS="--preset small --no-probes"
#
# OMP_WAIT_POLICY defaults to passive (here and in the s2hc binary itself): on a shared or
# loaded machine OpenMP threads that spin while waiting make every step several times
# slower (docs/performance.md); set OMP_WAIT_POLICY=active yourself on a dedicated
# machine. OPENBLAS_CORETYPE is set by the s2hc binary itself.
BENCH_ARGS ?=

.PHONY: bench
bench: $(BIN)
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} $(BIN) bench $(BENCH_ARGS)
