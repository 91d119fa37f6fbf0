# mk/paper.mk: `make paper` — every figure and table of the paper, regenerated, in one report.
#
#   make paper [PRESET=tiny|small|M|L]     the whole chain (default PRESET=small); docs/paper.md
#
# The chain, one target per step, each printing where it is and rerunning only what changed:
#   paper-deps      scripts/deps.sh (installs missing Debian packages; quiet when all present)
#   $(BIN)          the build
#   paper-data      s2hc data prepare (cached shards are kept)
#   paper-grids     s2hc grid experiments/{paper,ablations,streams}.yaml --set preset=$(PRESET)
#                   -> runs/$(PRESET)/{paper,ablations,streams}/ (index.csv; .complete once
#                   every point has run; resumable, finished points are never retrained)
#   paper-ablate    s2hc ablate --record --what identity,mean,branch --mean-from train on
#                   the paper grid's runs (/ablate in each run file, the figure
#                   beyond_ablation; log: $(PAPER_OUT)/ablate.log)
#   paper-analyze   s2hc analyze -> $(PAPER_OUT)/data/*.dat, tables/*.{md,tex,html,csv}
#   paper-figures   gnuplot plots/<figure>.gp -> $(PAPER_OUT)/<figure>.{png,svg}
#   paper-report    s2hc report --no-analyze --no-plots -> $(PAPER_OUT)/index.html
# Figures depend on the analysis output only, the analysis on the grids' stamps
# (and the analysis sources), never on the binary's timestamp: rebuilding does not retrain.
#   make paper-clean    removes $(PAPER_OUT) (never the runs)
#
# Budgets on a 2-core CPU: PRESET=tiny under 5 minutes, PRESET=small under an hour. The
# step counts below size each preset to fit (the grid files keep their own defaults for
# small, M and L; tiny shortens everything).
PRESET    ?= small
PAPER_OUT ?= out/paper
PAPER_RUNS ?= runs/$(PRESET)
# make writes these paths into its rules unquoted: a space would split one into two (and
# paper-clean would remove both), so such a path, or none, is refused
ifneq ($(words $(PAPER_OUT)) $(words $(PAPER_RUNS)),1 1)
$(error PAPER_OUT and PAPER_RUNS must each be one path without spaces (PAPER_OUT='$(PAPER_OUT)', PAPER_RUNS='$(PAPER_RUNS)'))
endif
# The command that analyses and reports (bin/s2hc once main.c has analyze/report).
PAPER_S2HC ?= $(BIN)
PAPER_J   ?=

# Per-preset overrides (--set) for the grids. The streams grid's runs count for throughput
# only, so their end-of-training probe is off (probe.final_samples=0). "common" goes to paper.yaml and
# ablations.yaml alike so the two grids' s2hc runs are the same config (the analysis
# counts a repeated config once) and identity is comparable with the paper grid's runs.
ifeq ($(PRESET),tiny)
PAPER_COMMON := --set train.steps=100 --set train.warmup=10 --set train.lr=3e-3 --set train.min_lr=3e-4 \
                --set train.eval_every=50 --set train.eval_batches=4 --set train.ckpt_every=0 \
                --set probe.every=10 --set probe.final_samples=32 --set train.seed=1337
PAPER_SET_PAPER := $(PAPER_COMMON)
PAPER_SET_ABL   := $(PAPER_COMMON)
# streams at tiny: a 1-layer, 16-wide model, 3 steps, no end-of-training probe (the grid
# leaves mHC-lite at n = 8 to M and L)
PAPER_SET_STREAMS := --set train.steps=3 --set train.warmup=1 --set probe.final_samples=0 --set model.n_layer=1 \
                     --set model.n_embd=16 --set model.n_head=1 --set model.block_size=32 --set train.batch=4
else ifeq ($(PRESET),small)
# the grid files' own small settings (500 steps, probes every 50, 128 final samples)
PAPER_SET_PAPER :=
PAPER_SET_ABL   :=
# streams: 4-sequence steps (mHC-lite at n = 7 mixes 5 040 permutations a token)
PAPER_SET_STREAMS := --set probe.final_samples=0 --set train.batch=4
else
# M and L: the preset's 10 000 steps and the grid files' eval/probe cadence (GPUs, Slurm)
PAPER_SET_PAPER :=
PAPER_SET_ABL   := --set train.steps=10000 --set train.warmup=200 --set train.eval_every=500 --set train.ckpt_every=500 \
                   --set probe.every=250 --set probe.final_samples=256
PAPER_SET_STREAMS := --set probe.final_samples=0
endif

# A grid exits 1 when some point failed or diverged: the report shows them (HC diverging
# is one of the paper's claims), so only a bad grid (2) or an interrupt (130) stops the
# chain. The grid's step is done when its stamp (<grid>/.complete) is written, after the
# grid has run every point: index.csv itself is rewritten as the grid goes, so an
# interrupted grid would otherwise read as done to the next `make paper`. Points another
# process trains (a second `make paper`, a grid or a training started by hand) are
# skipped by the grid, which exits 0: the step is not done either, and the chain stops.
PAPER_GRID_RC = if [ $$rc -eq 2 ] || [ $$rc -ge 128 ]; then exit $$rc; fi; \
	  [ $$rc -eq 0 ] || echo "paper: $(@D): some points failed or diverged (see $(@D)/index.csv); the report shows them"; \
	  if grep -q ',running,' $(@D)/index.csv 2>/dev/null; then \
	    echo "paper: $(@D): points are training in another process (index.csv: running); make paper again once it has ended"; \
	    exit 1; fi

PAPER_GRIDS := $(PAPER_RUNS)/paper/.complete $(PAPER_RUNS)/ablations/.complete $(PAPER_RUNS)/streams/.complete
PAPER_FIGS  := fig00_loss fig01_overview fig02_rowmax fig03_cos_mhc fig05_gradnorm fig06_colsums fig07_streams \
               fig08_entries fig09_heatmaps fig10_cos_s2hc fig11_cos_mhc_lite figv2_05_devsv beyond_jacobian \
               beyond_ablation hres_depth
PAPER_PNG   := $(PAPER_FIGS:%=$(PAPER_OUT)/%.png)
PAPER_META  := $(PAPER_OUT)/data/meta.gp
PAPER_SRC   := $(wildcard analysis/*.c analysis/*.h)

.PHONY: paper paper-deps paper-data paper-grids paper-ablate paper-analyze paper-figures paper-report paper-clean

paper: $(PAPER_OUT)/index.html
	@echo "paper: done: $(PAPER_OUT)/index.html (PRESET=$(PRESET), runs in $(PAPER_RUNS))"

paper-deps:
	@echo "paper: [1/7] deps"
	@scripts/deps.sh

paper-data: | paper-deps $(BIN)
	@echo "paper: [3/7] data (s2hc data prepare; cached corpora are kept)"
	@$(BIN) data prepare >/dev/null

# A preset stamp: rewritten only when PRESET changes, so switching presets reruns the analysis.
$(PAPER_OUT)/.preset: FORCE
	@mkdir -p $(@D)
	@echo "$(PRESET) $(PAPER_RUNS)" | cmp -s - $@ || echo "$(PRESET) $(PAPER_RUNS)" > $@

$(PAPER_RUNS)/paper/.complete: experiments/paper.yaml mk/paper.mk | paper-data
	@echo "paper: [4/7] grid experiments/paper.yaml (preset $(PRESET)) -> $(@D)"
	@rm -f $@; rc=0; $(BIN) grid experiments/paper.yaml --set preset=$(PRESET) $(PAPER_SET_PAPER) --out $(@D) --force $(PAPER_J) || rc=$$?; \
	  $(PAPER_GRID_RC)
	@touch $@

$(PAPER_RUNS)/ablations/.complete: experiments/ablations.yaml mk/paper.mk | paper-data
	@echo "paper: [4/7] grid experiments/ablations.yaml (preset $(PRESET)) -> $(@D)"
	@rm -f $@; rc=0; $(BIN) grid experiments/ablations.yaml --set preset=$(PRESET) $(PAPER_SET_ABL) --out $(@D) --force $(PAPER_J) || rc=$$?; \
	  $(PAPER_GRID_RC)
	@touch $@

$(PAPER_RUNS)/streams/.complete: experiments/streams.yaml mk/paper.mk | paper-data
	@echo "paper: [4/7] grid experiments/streams.yaml (preset $(PRESET)) -> $(@D)"
	@rm -f $@; rc=0; $(BIN) grid experiments/streams.yaml --set preset=$(PRESET) $(PAPER_SET_STREAMS) --out $(@D) --force $(PAPER_J) || rc=$$?; \
	  $(PAPER_GRID_RC)
	@touch $@

paper-grids: $(PAPER_GRIDS)

# The paper grid's runs with each sublayer's H_res replaced by I and by its mean (over
# held-out sequences of the training split, not the ones scored), and with
# each sublayer's output left out (s2hc ablate --record: /ablate in every run's file, which
# the figure beyond_ablation draws), once its grid is complete and again when the grid has
# run since. An rc run has branch alone (a note in the log); a point that failed (no
# checkpoint) is said in the log and the chain goes on; a usage error or an interrupt
# stops it.
# ablate runs on the CPU: at M and L (hours a run there) the chain leaves the step out
# unless PAPER_ABLATE=1, and the figure says that no run recorded ablations.
ifneq ($(filter tiny small,$(PRESET)),)
PAPER_ABLATE ?= 1
else
PAPER_ABLATE ?= 0
endif
PAPER_ABLATED := $(if $(filter 1,$(PAPER_ABLATE)),$(PAPER_RUNS)/paper/.ablated)
$(PAPER_RUNS)/paper/.ablated: $(PAPER_RUNS)/paper/.complete | $(BIN)
	@echo "paper: [4/7] ablate --record --what identity,mean,branch --mean-from train $(@D)/*/ (log: $(PAPER_OUT)/ablate.log)"
	@rm -f $@; mkdir -p $(PAPER_OUT); rc=0; $(BIN) ablate --record --what identity,mean,branch --mean-from train $(@D)/*/ >$(PAPER_OUT)/ablate.log 2>&1 || rc=$$?; \
	  if [ $$rc -eq 2 ] || [ $$rc -ge 128 ]; then tail -n 5 $(PAPER_OUT)/ablate.log; exit $$rc; fi; \
	  [ $$rc -eq 0 ] || echo "paper: some runs of $(@D) were not ablated (see $(PAPER_OUT)/ablate.log)"
	@touch $@

paper-ablate: $(PAPER_RUNS)/paper/.ablated

$(PAPER_META): $(PAPER_GRIDS) $(PAPER_ABLATED) $(PAPER_SRC) $(PAPER_OUT)/.preset | $(BIN)
	@echo "paper: [5/7] analyze -> $(PAPER_OUT)/data, $(PAPER_OUT)/tables"
	@# a failed analysis leaves no meta.gp, so the next make runs it again; one refused
	@# (exit 2: nothing written, or another analysis or report, a second make paper's,
	@# writes $(PAPER_OUT)) leaves the files as they are. The analysis removes the files
	@# of the previous one that it does not write again.
	$(PAPER_S2HC) analyze $(PAPER_RUNS)/paper $(PAPER_RUNS)/ablations $(PAPER_RUNS)/streams -o $(PAPER_OUT) \
	  || { rc=$$?; [ $$rc -eq 2 ] || rm -f $@; exit $$rc; }

paper-analyze: $(PAPER_META)

# gnuplot draws into $*.png.tmp and $*.svg.tmp (plots/style.gp's suffix), renamed once it
# has finished: a Ctrl-C or a kill while it draws leaves the older figure, never a cut one
# (and a Ctrl-C, SIGTERM or SIGHUP, the terminal closed, removes the .tmp files). setsid
# keeps a Ctrl-C or hangup from gnuplot, whose own handler can hang inside cairo: the
# figure is finished, then the recipe stops.
# What gnuplot says while drawing (a data file it cannot open, a column it cannot read:
# the figure drawn without it) is shown and kept in $*.gnuplot.log, none when it said
# nothing, for the report to put under the figure (s2hc report --no-plots reads it). The
# log is settled first and the PNG, make's target, renamed last: a kill between them leaves
# the older PNG, which make draws again, log and all, the next time.
PAPER_FIG_TMP = $(PAPER_OUT)/$*.png.tmp $(PAPER_OUT)/$*.svg.tmp $(PAPER_OUT)/$*.gnuplot.log.tmp
$(PAPER_OUT)/%.png: plots/%.gp plots/style.gp $(PAPER_META)
	@echo "paper: [6/7] figure $* -> $(PAPER_OUT)/$*.png, .svg"
	@trap 'cat $(PAPER_OUT)/$*.gnuplot.log.tmp >&2 2>/dev/null || :; rm -f $(PAPER_FIG_TMP); exit 130' INT TERM HUP; \
	  setsid -w gnuplot -e "dir='$(PAPER_OUT)'; suffix='.tmp'" $< </dev/null 2>$(PAPER_OUT)/$*.gnuplot.log.tmp; rc=$$?; \
	  cat $(PAPER_OUT)/$*.gnuplot.log.tmp >&2; \
	  [ $$rc -eq 0 ] && { if [ -s $(PAPER_OUT)/$*.gnuplot.log.tmp ]; \
	    then mv -f $(PAPER_OUT)/$*.gnuplot.log.tmp $(PAPER_OUT)/$*.gnuplot.log; \
	    else rm -f $(PAPER_OUT)/$*.gnuplot.log.tmp $(PAPER_OUT)/$*.gnuplot.log; fi; } && \
	  mv -f $(PAPER_OUT)/$*.svg.tmp $(PAPER_OUT)/$*.svg && mv -f $(PAPER_OUT)/$*.png.tmp $@ || { \
	    rm -f $(PAPER_OUT)/$*.png $(PAPER_OUT)/$*.svg $(PAPER_OUT)/$*.gnuplot.log $(PAPER_FIG_TMP); \
	    echo "paper: $< failed; its partial figure removed"; exit 1; }

paper-figures: $(PAPER_PNG)

$(PAPER_OUT)/index.html: $(PAPER_PNG) $(PAPER_META)
	@echo "paper: [7/7] report -> $@"
	$(PAPER_S2HC) report --no-analyze --no-plots -o $(PAPER_OUT)

paper-report: $(PAPER_OUT)/index.html

paper-clean:
	rm -rf $(PAPER_OUT)
