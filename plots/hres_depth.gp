# Beyond the paper: the learned residual matrices across depth, one column of panels per
# number of streams n. Top: each method's distance from the identity ||H_l - I||_2 of the
# token-averaged H_res per sublayer; bottom: the residual path's gain through sublayer l,
# ||H_l ... H_1||_2 (mean over sequences), log scale; mean ± std over the seeds, a line per
# method and optimisation recipe (a learning-rate sweep's rates dashed apart, named in the
# key as the table residual names them). Sublayers count from 1, as on Fig 6's and v2 Fig
# 5's axes (the data's column sublayer + 1; Fig 1's and Fig 9's l, as s2hc inspect --layer,
# from 0). Data: the rows of hres_layers_seeds.dat of the figures' scale, corpus and
# training length (columns: scale corpus method n steps recipe runs sublayer sv_max
# sv_max_std dist_identity dist_identity_std dev_sv_max dev_sv_max_std composite_norm
# composite_norm_std min_entry min_entry_std); meta.gp's hres_depth_lines_n<n> lists the
# lines "method:q" of recipe q (hres_depth_recipe<q>, its word in the data hres_depth_rword<q>).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "hres_depth"
if (!exists("hres_depth_n")) hres_depth_n = ""
N = words(hres_depth_n)
if (!exists("hres_depth_recipes")) hres_depth_recipes = 1
# at least wide enough for the title's second line (one panel's 540 cut the title at both ends)
W = 420 * (N > 0 ? N : 1) + 120; W = W < 840 ? 840 : W; H = 840
R = hres_depth_recipes
recipes = R > 1 ? sprintf("; a line per method and recipe (%d)", R) : ""
# a line "method:q": its method and its recipe's number q
lm(w) = w[1:strstrt(w, ":") - 1]
lq(w) = int(w[strstrt(w, ":") + 1:])
rword(q) = R > 0 ? value(sprintf("hres_depth_rword%d", q)) : "-"
# its key entry: the method, and the recipe where there are several; recipe q dashed q (1 solid)
lt(w) = R > 1 ? label(lm(w)).", ".value(sprintf("hres_depth_recipe%d", lq(w))) : label(lm(w))
ldt(w) = R > 1 ? lq(w) : dash(lm(w))
kfont = R > 1 ? ",8" : ",9"
# a row of line w at n streams in the figures' cell
row(w, nn) = strcol(1) eq scale_id && strcol(2) eq corpus_id && strcol(3) eq lm(w) && column(4) == nn && \
             column(5) == hres_depth_steps && strcol(6) eq rword(lq(w))
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout 2, (N > 0 ? N : 1) title sprintf("H_{res} across depth, by number of streams\n(%s, %s, %d steps; mean ± std over seeds%s)", scale, corpus, hres_depth_steps, recipes) font ",13"
  if (N == 0) {
    eval nodata("no run with a final probe"); plot 2 notitle
  }
  do for [k = 1:N] {
    nn = int(word(hres_depth_n, k))
    ms = value(sprintf("hres_depth_lines_n%d", nn))
    reset
    set title sprintf("n = %d: distance from the identity", nn)
    set xlabel "sublayer"; set ylabel "||H_l - I||_2"
    set grid; set key top left font kfont
    set xrange [0.5:Lh + 0.5]; set xtics sublayer_step(Lh); set yrange [0:*]
    plot for [j = 1:words(ms)] data("hres_layers_seeds.dat") \
         using (row(word(ms, j), nn) ? column(8) + 1 : 1/0):11:12 with yerrorlines pt 7 ps 0.6 \
         lc rgb color(lm(word(ms, j))) dt ldt(word(ms, j)) title lt(word(ms, j))
  }
  do for [k = 1:N] {
    nn = int(word(hres_depth_n, k))
    ms = value(sprintf("hres_depth_lines_n%d", nn))
    reset
    set title sprintf("n = %d: gain of the residual path", nn)
    set xlabel "sublayer l"; set ylabel "||H_l ... H_1||_2"
    set grid; set key top left font kfont
    set xrange [0.5:Lh + 0.5]; set xtics sublayer_step(Lh)
    # down to a gain below 1 (orthogonal's at lr 0.03: 0.85), not past the data (fixmin); a
    # gain of exactly 1 (identity, the sphere) sits a little above the border, whose label
    # would crowd the 1's at 0.9
    set logscale y; set yrange [*<0.95:*]; set autoscale yfixmin; set ytics add (0.5, 0.6, 0.7, 0.8, 0.9)
    plot for [j = 1:words(ms)] data("hres_layers_seeds.dat") \
         using (row(word(ms, j), nn) ? column(8) + 1 : 1/0):15:16 with yerrorlines pt 7 ps 0.6 \
         lc rgb color(lm(word(ms, j))) dt ldt(word(ms, j)) title lt(word(ms, j))
  }
  unset multiplot
}
