# Fig 9: H_res of validation sequence 0 (token-averaged) at four depths and the composite
# product, one row per method; row sums printed right of each matrix, column sums below.
# Data: fig9_<method>_<k>.dat (k = 0..3 depths, 4 composite) and fig9_<method>_<k>_sums.dat.
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig09_heatmaps"
K = words(hres_methods)
R = K > 0 ? K : 1
W = 1500; H = 80 + 300 * R
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot title sprintf("Fig 9: H_{res} at four depths and the composite, row sums (right) and column sums (below) (%s, %s)", scale, corpus) font ",13"
  if (K == 0) {
    eval nodata("no run with a final probe"); plot 2 notitle
  }
  do for [r = 1:K] {
    m = word(hres_methods, r)
    do for [c = 0:4] {
      reset
      eval hres_palette
      unset colorbox
      set origin c / 5.0, 1.0 - (r * 1.0) / R * 0.94 - 0.03
      set size 0.2, 0.94 / R
      set xrange [-0.5:hres_n + 0.5]; set yrange [hres_n + 0.5:-0.5]
      set border 0; set tics scale 0
      unset xtics; set ytics 0, 1, hres_n - 1 font ",8"
      set lmargin 4; set rmargin 1; set tmargin 2.5; set bmargin 0.5
      set title (c < 4 ? sprintf("%s, l = %s", label(m), word(fig9_depths, c + 1)) : sprintf("%s, composite", label(m))) font ",10"
      plot data(sprintf("fig9_%s_%d.dat", m, c)) using 1:2:3 with image notitle, \
           "" using 1:2:(sprintf("%.2f", $3)) with labels font ",7" notitle, \
           data(sprintf("fig9_%s_%d_sums.dat", m, c)) using 1:2:(sprintf("%.3f", $3)) with labels font ",7" tc rgb "#006400" notitle
    }
  }
  unset multiplot
}
