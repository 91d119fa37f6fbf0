# Fig 5: global gradient norm (before clipping) over training, one run per method, clamped
# at grad_clamp (5) for display as in the paper. Data: fig5_<method>.dat (step, clamped, raw).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig05_gradnorm"
W = 1100; H = 550
K = words(fig5_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set title sprintf("Fig 5: gradient norm over training (%s, %s; clamped at %g, largest raw value %.3g)", scale, corpus, grad_clamp, grad_max)
  if (K == 0) {
    eval nodata("no runs"); plot 2 notitle
  } else {
    set xlabel "training step"; set ylabel sprintf("gradient norm (clamped at %g)", grad_clamp)
    set grid; set key top right font ",10"
    set yrange [0:grad_clamp * 1.04]
    plot for [k = 1:K] data("fig5_".word(fig5_methods, k).".dat") using 1:2 with lines lw 1.2 \
         lc rgb color(word(fig5_methods, k)) dt dash(word(fig5_methods, k)) title label(word(fig5_methods, k))
  }
}
