# Fig 7: left, measured training throughput against the number of streams n (median
# tokens/s over the steps of the streams grid's runs); right, auxiliary parameters
# against n, counted, log scale. Data: fig7_tput_<method>.dat, params.dat.
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig07_streams"
W = 1300; H = 520
K = words(fig7_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 1, 2 title "Fig 7: cost against the number of streams" font ",13"
  if (K == 0) {
    eval nodata("no runs for the throughput (the streams grid)"); plot 2 notitle
  } else {
    set title sprintf("training throughput (%s, this machine)", fig7_scale)
    set xlabel "streams n"; set ylabel "tokens / s"
    set grid; set key top right font ",10"; set xrange [1.8:8.2]; set xtics 1
    set logscale y
    plot for [k = 1:K] data("fig7_tput_".word(fig7_methods, k).".dat") using 1:2 with linespoints pt 7 ps 0.8 lw 2 \
         lc rgb color(word(fig7_methods, k)) dt dash(word(fig7_methods, k)) title label(word(fig7_methods, k))
  }
  reset
  set title sprintf("auxiliary parameters (C = %d, %d layers)", params_C, params_layers)
  set xlabel "streams n"; set ylabel "auxiliary parameters"
  set logscale y; set format y "10^{%L}"; set grid
  set key top left font ",10"; set xrange [1.8:8.2]; set xtics 1
  pm(i) = i == 2 ? "hc" : i == 3 ? "mhc" : i == 4 ? "mhc_lite" : i == 5 ? "kromhc" : "s2hc"
  plot for [i = 2:6] data("params.dat") using 1:i with linespoints lc rgb color(pm(i)) pt 7 ps 0.8 lw 2 title label(pm(i))
  unset multiplot
}
