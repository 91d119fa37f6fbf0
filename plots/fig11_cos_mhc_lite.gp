# Fig 11: mean pairwise cosine similarity among the streams after mixing (H_res . X), one
# line per sublayer (colour = depth), over training: the fixed-identity baseline (left,
# from the ablation grid) against mhc_lite (right). Data: fig3_cos_<method>.dat
# (step, then one column per sublayer).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "fig11_cos_mhc_lite"
method = "mhc_lite"
W = 1300; H = 500
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 1, 2 title sprintf("Fig 11: stream cosine similarity per sublayer, identity vs %s (%s, %s)", label(method), scale, corpus) font ",13"
  do for [side = 1:2] {
    m = side == 1 ? "identity" : method
    have = value("cos_".m)
    Lm = value("cos_".m."_Lh")
    reset
    if (have) {
      set title label(m)
      set xlabel "training step"; set ylabel "mean pairwise cosine similarity"
      set grid; set yrange [cos_min - 0.1 * (1.0 - cos_min) - 0.001:1.0 + 0.05 * (1.0 - cos_min) + 0.001]
      set palette defined (0 '#fde725', 0.5 '#21918c', 1 '#440154')
      set cbrange [1:(Lm > 1 ? Lm : 2)]; set cblabel "sublayer"; set cbtics sublayer_step(Lm)
      unset key
      plot for [l = 1:Lm] data("fig3_cos_".m.".dat") using 1:(column(l + 1)):(l) with linespoints pt 7 ps 0.5 lw 1.5 lc palette z notitle
    } else {
      eval nodata(m eq "identity" ? "no identity run (the ablation grid trains it)" : "no ".label(m)." run with probes")
      plot 2 notitle
    }
  }
  unset multiplot
}
