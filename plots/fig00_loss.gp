# Training loss per step (faint) and its moving average (bold), one run per method, in the
# cell the figures show: context for Table 1. Data: loss_<method>.dat (step, loss, moving average).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig00_loss"
W = 1100; H = 550
K = words(loss_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set title sprintf("Training loss (%s, %s)", scale, corpus)
  if (K == 0) {
    eval nodata("no runs"); plot 2 notitle
  } else {
    set xlabel "training step"; set ylabel "train loss (nats per byte)"
    set grid; set key top right font ",10"
    # each step's loss thin and half transparent (#AARRGGBB) under the bold moving average
    faint(m) = "#a0".color(m)[2:7]
    plot for [k = 1:K] data("loss_".word(loss_methods, k).".dat") using 1:2 with lines lw 0.6 \
         lc rgb faint(word(loss_methods, k)) notitle, \
         for [k = 1:K] data("loss_".word(loss_methods, k).".dat") using 1:3 with lines lw 2 \
         lc rgb color(word(loss_methods, k)) dt dash(word(loss_methods, k)) title label(word(loss_methods, k))
  }
}
