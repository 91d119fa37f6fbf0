# Beyond the paper: spectral norm of d(final streams)/d(initial streams) for the full
# network (branches on) and for the residual path alone (branches off), mean ± std over
# validation sequences, per method. Data: beyond_jacobian.dat
# (index, method, full mean, full std, residual mean, residual std, sequences).
# style.gp from the script's own folder (ARG0 up to its last "/"), found without a shell,
# which a quote in the path broke
script_dir(s, i) = i < 1 ? "." : s[i:i] eq "/" ? s[1:i - 1] : script_dir(s, i - 1)
load script_dir(ARG0, strlen(ARG0))."/style.gp"
stem = "beyond_jacobian"
W = 1100; H = 550
do for [fmt in "png svg"] {
  reset
  eval term(fmt)
  set title sprintf("Beyond: full-network Jacobian norm vs residual-path norm (%s, %s)", scale, corpus)
  if (jac_rows == 0) {
    eval nodata("no run with a Jacobian estimate"); plot 2 notitle
  } else {
    set ylabel "||dX_L / dX_0||_2 (mean ± std over sequences)"
    set style data histogram; set style histogram errorbars gap 2 lw 1.2
    set style fill solid 0.8 border -1; set boxwidth 0.9
    set grid ytics; set key top left font ",10"
    # the bars from 0.5, or from below the smallest norm when one is under it
    stats data("beyond_jacobian.dat") using 3 nooutput; jlo = STATS_min
    stats data("beyond_jacobian.dat") using 5 nooutput; jlo = STATS_min < jlo ? STATS_min : jlo
    set logscale y; set yrange [(jlo < 0.5 ? 0.8 * jlo : 0.5):*]
    set xtics rotate by -30
    plot data("beyond_jacobian.dat") using 3:4:xtic(2) title "full network" lc rgb "#0072b2", \
         "" using 5:6 title "residual path only" lc rgb "#d55e00"
  }
}
