# v2 Fig 5: singular values (descending) of the deviation part H_res - J (J = ones/n) of
# the token-averaged H_res per sublayer, one panel per method. The last is 0 when the
# rows or columns sum to 1. Data: figv2_5_<method>.dat (sublayer, sv_1 ... sv_n).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "figv2_05_devsv"
K = words(devsv_methods)
W = 380 * (K > 0 ? K : 1) + 100; H = 480
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 1, (K > 0 ? K : 1) title sprintf("v2 Fig 5: singular values of H_{res} - J per sublayer (%s, %s)", scale, corpus) font ",13"
  if (K == 0) {
    eval nodata("no run with a final probe"); plot 2 notitle
  }
  do for [k = 1:K] {
    m = word(devsv_methods, k)
    reset
    set title label(m)
    set xlabel "sublayer"; set ylabel "singular value"
    set grid; set key center right font ",9"
    set yrange [-0.05:1.1]; set xtics sublayer_step(Lh)
    set xrange [0.5:Lh + 0.5]
    plot for [s = 1:devsv_n] data("figv2_5_".m.".dat") using 1:(column(s + 1)) with linespoints pt (s + 3) ps 0.9 dt s lw 1.5 \
         title sprintf("σ_%d", s)
  }
  unset multiplot
}
