# mk/bench.mk: `make bench`, training speed measured against the machine's limit.
#
#   make bench                        build, then bin/s2hc bench (CSV under out/bench/)
#   make bench BENCH_ARGS=--quick     the short version (one to three minutes on 2 cores)
#   make bench BENCH_ARGS="--preset small --no-probes"
#   make bench BENCH_ARGS="--preset small --methods s2hc --rounds 9"   rc and s2hc only
#   make bench-frame                  the frame's regions and parts timed alone, one thread
#   make bench-frame FRAME_ARGS="--methods s2hc --n 8"
#   make bench-layout                 what the streams' layout costs a pass over them, cold
#
# The s2hc binary sets GOMP_SPINCOUNT (a short spin, then sleep) and OPENBLAS_CORETYPE
# itself when they are unset (docs/performance.md, "Settings"); set OMP_WAIT_POLICY or
# GOMP_SPINCOUNT yourself to measure another wait policy.
BENCH_ARGS ?=
FRAME_ARGS ?=
LAYOUT_ARGS ?=
# tools/frame_bench.c includes harness/model.c (its static frame regions), so it links
# everything but model.o (and compiles at -O0 in the sanitizer build, Makefile).
FRAME_BENCH := $(BUILD)/tools/frame_bench

.PHONY: bench bench-frame bench-layout
bench: $(BIN)
	$(BIN) bench $(BENCH_ARGS)

bench-frame: $(FRAME_BENCH)
	$(FRAME_BENCH) $(FRAME_ARGS)

.SECONDARY: $(FRAME_BENCH).o
$(FRAME_BENCH): $(FRAME_BENCH).o $(LIB_OBJ_NO_MODEL)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB_OBJ_NO_MODEL) $(LDLIBS)

LAYOUT_BENCH := $(BUILD)/tools/layout_bench
bench-layout: $(LAYOUT_BENCH)
	$(LAYOUT_BENCH) $(LAYOUT_ARGS)

$(LAYOUT_BENCH): tools/layout_bench.c $(CC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

tests-build: $(FRAME_BENCH) $(LAYOUT_BENCH)
