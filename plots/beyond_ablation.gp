# Beyond the paper: what each method's residual mixing, and each sublayer, is worth. The
# rise in validation loss when one sublayer's H_res is replaced, for every token, by the
# identity (left) or by its own average over the tokens (middle), or when the sublayer's
# output is left out (right: rc too), against the sublayer (from 1), a line per method,
# mean ± std over the seeds that measured it (`s2hc ablate --record`); the key gives each
# method's rise with every sublayer ablated at once; a panel draws the methods with numbers
# in it (meta.gp's ablate_in<p>). Data: beyond_ablation.dat (method, sublayer: 0 for all at once,
# identity mean, std, mean-matrix mean, std, branch mean, std, runs).
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "beyond_ablation"
W = 1500; H = 500
M = words(ablate_methods)
# method j's rise with every sublayer ablated at once, in panel p (meta.gp's ablate_all<j>_<p>)
all(j, p) = value(sprintf("ablate_all%d_%d", j, p))
key(j, p) = label(word(ablate_methods, j)).(all(j, p) == all(j, p) ? sprintf(" (all: %+.3g)", all(j, p)) : "")
# the middle panel's matrices: averaged over held-out training sequences (s2hc ablate
# --mean-from train, as make paper records them) or over the sequences scored
mean_from = exists("ablate_mean_from") ? ablate_mean_from : ""
mean_title = mean_from eq "train" ? "H_{res} := its average over held-out tokens (no dynamics)" \
           : mean_from eq "mixed" ? "H_{res} := its average over the tokens (held out in some runs)" \
           : "H_{res} := its average over the tokens (no dynamics)"
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  if (M == 0) {
    set title sprintf("Beyond: the loss's rise with H_{res} replaced (%s, %s)", scale, corpus)
    eval nodata("no run with ablations (s2hc ablate --record RUNS, then analyze again)"); plot 2 notitle
  } else {
    set multiplot layout 1, 3 title sprintf("Beyond: the loss's rise with one sublayer ablated (%s, %s; mean ± std over seeds)", scale, corpus) font ",12"
    do for [p = 1:3] {
      reset
      set title (p == 1 ? "H_{res} := I (no mixing)" : p == 2 ? mean_title \
                 : "the sublayer's output left out (f := 0)")
      set xlabel "sublayer"; set ylabel "Δ validation loss (nats/token)"
      set grid; set key top left font ",9"
      set xrange [0.5:ablate_Lh + 0.5]; set xtics sublayer_step(ablate_Lh)
      set xzeroaxis lt -1
      set offsets 0, 0, graph 0.4, 0 # headroom above the lines for the key
      drawn = value(sprintf("ablate_in%d", p)) # the methods (their j) with numbers in this panel
      if (words(drawn) == 0) {
        # on lines of their own (\\n: a new line in the label nodata sets), within the panel
        eval nodata(p == 3 ? "not measured:\\ns2hc ablate --record\\n--what identity,mean,branch RUNS" \
                           : "not measured:\\ns2hc ablate --record RUNS\\n(rc has no H_{res})")
        plot 2 notitle
      } else {
        plot for [jw in drawn] data("beyond_ablation.dat") \
             using (strcol(1) eq word(ablate_methods, int(jw)) && column(2) > 0 ? column(2) : 1/0):(column(2 * p + 1)):(column(2 * p + 2)) \
             with yerrorlines pt 7 ps 0.6 lc rgb color(word(ablate_methods, int(jw))) dt dash(word(ablate_methods, int(jw))) \
             title key(int(jw), p)
      }
    }
    unset multiplot
  }
}
