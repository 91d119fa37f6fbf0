# Beyond the paper: the final validation loss against depth (a sweep of model.n_layer,
# experiments/depth.yaml), one panel per optimisation recipe (a learning-rate sweep's
# rates side by side: their losses differ by more than the methods do, and each panel
# compares the methods at one rate, as the tables' rows do), one line per method: the mean
# over the finished seeds with its 95 % t interval as error bars (none with one seed), x
# the number of blocks. Each method's points sit a little apart sideways so that the bars
# do not hide each other. Data: loss_depth.dat (columns: recipe_index recipe method n
# n_layer scale runs finished val_loss val_loss_std ci_lo ci_hi); meta.gp's
# loss_depth_recipes, loss_depth_depths, loss_depth_where, loss_depth_recipe<q> (recipe q's
# name) and loss_depth_methods_r<q>. `s2hc report` draws it only where two or more scales
# of the runs differ in depth alone (summary.txt's depth_scales).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "loss_depth"
if (!exists("loss_depth_recipes")) loss_depth_recipes = 0
if (!exists("loss_depth_depths")) loss_depth_depths = ""
if (!exists("loss_depth_where")) loss_depth_where = ""
R = loss_depth_recipes
D = words(loss_depth_depths)
# up to 3 panels in a row
cols = R <= 1 ? 1 : R <= 3 ? R : 3
rows = R <= 3 ? 1 : (R + 2) / 3
W = 560 * cols + 80; W = W < 760 ? 760 : W; H = 470 * rows + 70
dmin = D > 0 ? word(loss_depth_depths, 1) + 0 : 0
dmax = D > 0 ? word(loss_depth_depths, D) + 0 : 1
# method j of J drawn shifted by shift(j, J) blocks
shift(j, J) = (j - (J + 1) / 2.0) * 0.015 * (dmax - dmin)
# a row of method m in recipe q; col(q, m, c) its column c, else undefined (y and its bars
# too: an undefined x alone still reached the y range, and every panel had every recipe's)
row(q, m) = column(1) == q && strcol(3) eq m
col(q, m, c) = row(q, m) ? column(c) : 1/0
xt = ""
do for [k = 1:D] { xt = xt.(k > 1 ? ", " : "").word(loss_depth_depths, k) }
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set multiplot layout rows, cols title sprintf("Validation loss against depth\n(%s; mean over seeds, 95 %% t interval)", loss_depth_where) font ",13"
  if (R == 0 || D < 2) {
    eval nodata("no two scales of the runs differ in depth alone"); plot 2 notitle
  }
  do for [q = 1:(R > 0 && D >= 2 ? R : 0)] {
    ms = value(sprintf("loss_depth_methods_r%d", q))
    J = words(ms)
    reset
    if (R > 1) { set title value(sprintf("loss_depth_recipe%d", q)) }
    set xlabel "blocks"; set ylabel "validation loss"
    set grid; set key below center horizontal font ",9" samplen 2 height 1.5 reverse Left
    eval "set xtics (".xt.")"
    set xrange [dmin - 0.08 * (dmax - dmin):dmax + 0.08 * (dmax - dmin)]
    if (J == 0) { eval nodata("no finished run of this recipe"); plot 2 notitle; continue }
    plot for [j = 1:J] data("loss_depth.dat") using (col(q, word(ms, j), 5) + shift(j, J)):(col(q, word(ms, j), 9)):(col(q, word(ms, j), 11)):(col(q, word(ms, j), 12)) \
         with yerrorbars pt 7 ps 0.7 lc rgb color(word(ms, j)) notitle, \
         for [j = 1:J] data("loss_depth.dat") using (col(q, word(ms, j), 5) + shift(j, J)):(col(q, word(ms, j), 9)) \
         with linespoints pt 7 ps 0.7 lw 2 lc rgb color(word(ms, j)) dt dash(word(ms, j)) title label(word(ms, j))
  }
  unset multiplot
}
