# grid.mk: targets of the experiment-grid module (included by the Makefile: -include mk/*.mk).
#   make slurm-check   the local Slurm round trip of `s2hc grid --slurm --submit`
#                      (starts munged, slurmctld, slurmd on localhost; skipped unless root
#                      with Slurm installed)
#   make deps-slurm    install Slurm and munge (scripts/deps.sh --slurm; root)

# Included before the Makefile's own first target, these must not become the default goal.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

.PHONY: slurm-check deps-slurm

slurm-check: all
	@S2HC_BIN=$(call shq,$(abspath $(BIN))) tests/cli/slurm_check.sh

deps-slurm:
	@scripts/deps.sh --slurm
