# Fig 1: learned H_res of mHC, mHC-lite (KromHC) and s2HC as annotated heat maps (top);
# perplexity relative to RC per out-of-domain corpus (bottom left); auxiliary parameters
# against n (bottom right). Data: fig1_hres_<method>.dat, fig1_ood.dat, params.dat.
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig01_overview"
# the out-of-domain bars: one per method, and per optimisation recipe where the cell holds
# several (a learning-rate sweep): recipe q of column i (ood_rq) lighter as q grows, named
# in the key as the tables name it (ood_recipe<q>)
if (!exists("ood_recipes")) ood_recipes = 1
if (!exists("ood_rq")) ood_rq = ""
oq(i) = ood_rq eq "" ? 1 : int(word(ood_rq, i - 1))
otitle(i) = label(word(ood_methods, i - 1)).(ood_recipes > 1 ? ", ".value(sprintf("ood_recipe%d", oq(i))) : "")
W = 1400; H = 950
K = words(hres_methods)
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot title sprintf("Fig 1 (%s, trained on %s)", scale, corpus) font ",14"
  # top row: heat maps
  if (K == 0) {
    set origin 0, 0.5; set size 1, 0.45
    eval nodata("no mHC / mHC-lite / s^2HC run with a final probe")
    plot 2 notitle
  }
  do for [k = 1:K] {
    reset
    m = word(hres_methods, k)
    set origin (k - 1.0) / K, 0.5; set size 1.0 / K, 0.46
    set size square
    eval hres_palette
    set colorbox; set cbtics 0.5
    set xrange [-0.5:hres_n - 0.5]; set yrange [hres_n - 0.5:-0.5]
    set xtics 0, 1, hres_n - 1; set ytics 0, 1, hres_n - 1
    set xlabel "input stream j"; set ylabel "output stream i"
    set title sprintf("%s H_{res} (l = %d)", label(m), fig1_layer)
    plot data("fig1_hres_".m.".dat") using 1:2:3 with image notitle, \
         "" using 1:2:(sprintf("%.3f", $3)) with labels font ",9" notitle
  }
  # bottom left: OOD perplexity relative to RC
  reset
  set origin 0, 0; set size 0.5, 0.48
  if (ood_rows > 0 && ood_cols > 0) {
    set title "Out-of-domain perplexity relative to RC"
    set ylabel "PPL / PPL(RC) - 1  (%)"
    set style data histogram; set style histogram clustered gap 1
    set style fill solid 0.85 border -1; set boxwidth 0.9
    set grid ytics; set key below horizontal font ",10"
    set xtics nomirror noenhanced  # the corpora by their names, markup-free
    set yrange [*:*]
    plot for [i = 2:ood_cols + 1] data("fig1_ood.dat") using (100 * (column(i) - 1)):xtic(1) \
         title otitle(i) lc rgb color(word(ood_methods, i - 1)) fs solid 0.85 - 0.3 * (oq(i) - 1) border -1, \
         0 with lines lc rgb "black" dt 2 notitle
  } else {
    eval nodata("needs RC and another method with out-of-domain evals in this cell")
    plot 2 notitle
  }
  # bottom right: auxiliary parameters against n
  reset
  set origin 0.5, 0; set size 0.5, 0.48
  set title sprintf("Auxiliary parameters (C = %d, %d layers)", params_C, params_layers)
  set xlabel "streams n"; set ylabel "auxiliary parameters"
  set logscale y; set format y "10^{%L}"; set grid
  set key top left font ",9"
  set xrange [1.8:8.2]
  pm(i) = i == 2 ? "hc" : i == 3 ? "mhc" : i == 4 ? "mhc_lite" : i == 5 ? "kromhc" : "s2hc"
  plot for [i = 2:6] data("params.dat") using 1:i with linespoints lc rgb color(pm(i)) pt 7 ps 0.8 title columnhead(i)
  unset multiplot
}
