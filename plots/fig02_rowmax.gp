# Fig 2: identity degeneration over training. Left: median row-wise maximum of H_res with
# its 10-90 % band (every row of every per-token matrix of every sublayer). Right: the
# fraction of per-token matrices whose row maxima all sit on the diagonal.
# Data: fig2_<method>.dat (step p10 median p90 diag_frac).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig02_rowmax"
W = 1300; H = 500
K = words(fig2_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 1, 2 title sprintf("Fig 2: row-wise max of H_{res} and diagonal dominance (%s, %s)", scale, corpus) font ",13"
  if (K == 0) {
    eval nodata("no run with /probe data for mHC, mHC-lite or s^2HC"); plot 2 notitle
    eval nodata("no data"); plot 2 notitle
  } else {
    set xlabel "training step"; set ylabel "row-wise max of H_{res}"
    set grid; set key bottom left font ",10"
    set style fill transparent solid 0.2 noborder
    plot for [k = 1:K] data("fig2_".word(fig2_methods, k).".dat") using 1:2:4 with filledcurves \
           lc rgb color(word(fig2_methods, k)) notitle, \
         for [k = 1:K] data("fig2_".word(fig2_methods, k).".dat") using 1:3 with linespoints pt 7 ps 0.6 lw 2 \
           lc rgb color(word(fig2_methods, k)) dt dash(word(fig2_methods, k)) title label(word(fig2_methods, k))." median (10-90 % band)"
    set ylabel "fraction diagonal-dominant"
    set yrange [-0.02:1.05]
    plot for [k = 1:K] data("fig2_".word(fig2_methods, k).".dat") using 1:5 with linespoints pt 7 ps 0.6 lw 2 \
           lc rgb color(word(fig2_methods, k)) dt dash(word(fig2_methods, k)) title label(word(fig2_methods, k))
  }
  unset multiplot
}
