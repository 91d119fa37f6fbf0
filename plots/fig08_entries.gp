# Fig 8: distribution of every entry of every per-token H_res of every sublayer over the
# final probe's sequences, per method (fraction per 0.01 bin, log scale; empty bins drop
# below the axis).
# Data: fig8_<method>.dat (bin centre, fraction).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig08_entries"
W = 1100; H = 550
K = words(fig8_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set title sprintf("Fig 8: distribution of H_{res} entries (%s, %s)", scale, corpus)
  if (K == 0) {
    eval nodata("no run with a final probe"); plot 2 notitle
  } else {
    set xlabel "entry value H_{res}[i,j]"; set ylabel "fraction of entries per 0.01 bin"
    set logscale y; set format y "10^{%L}"; set grid
    set key top left font ",10" # the corner the entries leave free (the peaks sit at 0 and 1)
    set xrange [-1:1.5]; set yrange [1e-7:1]
    set arrow 1 from 0, graph 0 to 0, graph 1 nohead dt 2 lc rgb "black"
    plot for [k = 1:K] data("fig8_".word(fig8_methods, k).".dat") using 1:($2 > 0 ? $2 : 1e-12) with steps lw 1.6 dt k \
         lc rgb color(word(fig8_methods, k)) title label(word(fig8_methods, k))
  }
}
