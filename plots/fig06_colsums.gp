# Fig 6: are the sums of H_res kept at 1? Top: column sums (what each input stream gives)
# of each validation sequence's token-averaged H_res per sublayer (box: quartiles,
# whiskers: min and max), of the composite product over all sublayers, and the spectral
# norm of the cumulative composite over the first l sublayers (mean ± std over sequences).
# Bottom: the same for row sums (what each output stream receives), and the worst
# per-token |sum - 1| per sublayer on a log scale. Our convention is X_next = H_res . X;
# the authors store the transpose, so their "column sums" are our row sums.
# Data: fig6_{colsum,rowsum}_<m>.dat, fig6_composite{,_rows}.dat, fig6_cumnorm_<m>.dat,
# fig6_sumdev_<m>.dat.
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig06_colsums"
W = 1500; H = 950
K = words(fig6_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 2, 3 title sprintf("Fig 6: column and row sums of H_{res}, composite spectral norm (%s, %s)", scale, corpus) font ",13"
  if (K == 0) {
    do for [p = 1:6] { eval nodata("no run with a final probe"); plot 2 notitle }
  } else {
    do for [side = 1:2] {
      what = side == 1 ? "column" : "row"
      reset
      set title sprintf("per-sublayer %s sums", what)
      set xlabel "sublayer"; set ylabel sprintf("%s sum of H_{res}", what)
      set grid; set key top left font ",9"
      set boxwidth 0.15 absolute
      set style fill solid 0.5 border -1
      set xrange [0.4:Lh + 0.6]; set xtics sublayer_step(Lh)
      f(m) = data(sprintf("fig6_%s_%s.dat", side == 1 ? "colsum" : "rowsum", m))
      # at least [0.99, 1.01], wider (with a margin) where the whiskers reach: sums exactly
      # 1 would leave gnuplot's autoscale an empty range
      lo = 0.99; hi = 1.01
      do for [k = 1:K] {
        stats f(word(fig6_methods, k)) using 2 nooutput; lo = STATS_min < lo ? STATS_min : lo
        stats f(word(fig6_methods, k)) using 6 nooutput; hi = STATS_max > hi ? STATS_max : hi
      }
      pad = 0.04 * (hi - lo); set yrange [lo < 0.99 ? lo - pad : lo : hi > 1.01 ? hi + pad : hi]
      plot for [k = 1:K] f(word(fig6_methods, k)) using 1:3:2:6:5 with candlesticks whiskerbars \
             lc rgb color(word(fig6_methods, k)) title label(word(fig6_methods, k)), \
           for [k = 1:K] f(word(fig6_methods, k)) using 1:4:4:4:4 with candlesticks lc rgb "black" notitle, \
           1 with lines dt 2 lc rgb "black" notitle
      reset
      set title sprintf("composite (product over all sublayers): %s sums", what)
      set ylabel sprintf("%s sum of the composite", what); set grid
      set boxwidth 0.4 absolute; set style fill solid 0.5 border -1
      set xrange [-0.6:K - 0.4]
      unset key
      g = data(side == 1 ? "fig6_composite.dat" : "fig6_composite_rows.dat")
      stats g using 2 nooutput; lo = STATS_min < 0.99 ? STATS_min : 0.99
      stats g using 6 nooutput; hi = STATS_max > 1.01 ? STATS_max : 1.01
      pad = 0.04 * (hi - lo); set yrange [lo < 0.99 ? lo - pad : lo : hi > 1.01 ? hi + pad : hi]
      plot g using 1:3:2:6:5:xtic(7) with candlesticks whiskerbars lc rgb "#666666" notitle, \
           g using 1:4:4:4:4 with candlesticks lc rgb "black" notitle, \
           1 with lines dt 2 lc rgb "black" notitle
      reset
      if (side == 1) {
        set title "cumulative composite spectral norm"
        set xlabel "depth l (sublayers)"; set ylabel "||H_l ... H_1||_2 (mean ± std)"
        set grid; set key top left font ",9"; set xtics sublayer_step(Lh)
        set xrange [0.5:Lh + 0.5]
        lo = 0.99; hi = 1.01
        do for [k = 1:K] {
          stats data("fig6_cumnorm_".word(fig6_methods, k).".dat") using ($2 - $3) nooutput
          lo = STATS_min < lo ? STATS_min : lo
          stats data("fig6_cumnorm_".word(fig6_methods, k).".dat") using ($2 + $3) nooutput
          hi = STATS_max > hi ? STATS_max : hi
        }
        pad = 0.04 * (hi - lo); set yrange [lo < 0.99 ? lo - pad : lo : hi > 1.01 ? hi + pad : hi]
        set format y "%.4f"
        plot for [k = 1:K] data("fig6_cumnorm_".word(fig6_methods, k).".dat") using 1:2:3 with yerrorlines pt 7 ps 0.6 \
               lc rgb color(word(fig6_methods, k)) dt dash(word(fig6_methods, k)) title label(word(fig6_methods, k))
      } else {
        set title "worst per-token |sum - 1| (solid: columns, dashed: rows)"
        set xlabel "sublayer"; set ylabel "max over tokens of |sum - 1|"
        set grid; set key bottom left font ",9" opaque; set xtics sublayer_step(Lh)
        set xrange [0.5:Lh + 0.5]
        set logscale y; set format y "10^{%L}"; set yrange [1e-9:*]
        plot for [k = 1:K] data("fig6_sumdev_".word(fig6_methods, k).".dat") using 1:($2 > 1e-9 ? $2 : 1e-9) with linespoints pt 7 ps 0.6 \
               lc rgb color(word(fig6_methods, k)) title label(word(fig6_methods, k)), \
             for [k = 1:K] data("fig6_sumdev_".word(fig6_methods, k).".dat") using 1:($3 > 1e-9 ? $3 : 1e-9) with linespoints pt 6 ps 0.6 dt 2 \
               lc rgb color(word(fig6_methods, k)) notitle
      }
    }
  }
  unset multiplot
}
