# style.gp: shared by every figure script (load it first). It reads the analysis output's
# list of what has data (DIR/data/meta.gp, written by `s2hc analyze`) and defines colours,
# labels and the two terminals every figure is drawn with (PNG for the page, SVG for print).
#   gnuplot -e "dir='out/paper'" plots/fig02_rowmax.gp   ->  out/paper/fig02_rowmax.{png,svg}
if (!exists("dir")) dir = "out/paper"
load dir."/data/meta.gp"
data(name) = dir."/data/".name

# one colour and one display name per method, the same in every figure; an ablation's
# variant "method+option" (s2hc+expm, s2hc+exact, s2hc_rot+expm, orthogonal+expm) a shade of
# its method's colour, each its own, dashed in the line figures, and the method's name with
# the option
base(m) = strstrt(m, "+") ? m[1:strstrt(m, "+") - 1] : m
option(m) = strstrt(m, "+") ? m[strstrt(m, "+"):] : ""
color1(m) = m eq "rc" ? "#555555" : m eq "identity" ? "#999999" : m eq "hc" ? "#e69f00" : \
            m eq "mhc" ? "#0072b2" : m eq "mhc_lite" ? "#56b4e9" : m eq "kromhc" ? "#009e73" : \
            m eq "orthogonal" ? "#cc79a7" : m eq "s2hc" ? "#d55e00" : m eq "s2hc_rot" ? "#66a61e" : "#000000"
color(m) = option(m) eq "" ? color1(m) : m eq "s2hc+expm" ? "#7f2704" : m eq "s2hc+exact" ? "#fdae6b" : \
           m eq "s2hc_rot+expm" ? "#b09a00" : m eq "orthogonal+expm" ? "#8e3b74" : \
           option(m) eq "+normal" ? "#a63603" : "#6a3d9a"
label1(m) = m eq "rc" ? "RC" : m eq "identity" ? "identity" : m eq "hc" ? "HC" : m eq "mhc" ? "mHC" : \
            m eq "mhc_lite" ? "mHC-lite" : m eq "kromhc" ? "KromHC" : m eq "orthogonal" ? "orthogonal" : \
            m eq "s2hc" ? "s^2HC" : m eq "s2hc_rot" ? "s^2HC-rot" : m
label(m) = label1(base(m)).option(m)
# a variant's lines dashed (dt 2), its method's solid: s2hc+exact's light orange beside HC's
dash(m) = option(m) eq "" ? 1 : 2

# term(fmt): the terminal and output file for "png" or "svg"; W, H and stem set by the script
# (the file name is an expression of dir and stem, never text pasted into the command: a
# quote or a space in the output folder's path stays a path). With -e "suffix='.tmp'" the
# files are DIR/STEM.png.tmp and .svg.tmp: `s2hc report` and `make paper` draw there and
# rename them once gnuplot has finished, so a drawing cut short never stands as a figure
if (!exists("suffix")) suffix = ""
term(fmt) = fmt eq "png" ? \
    sprintf("set terminal pngcairo enhanced size %d,%d font 'DejaVu Sans,11' linewidth 1.3; set output dir.'/'.stem.'.png'.suffix", W, H) : \
    sprintf("set terminal svg enhanced size %d,%d font 'DejaVu Sans,11' background '#ffffff'; set output dir.'/'.stem.'.svg'.suffix", W, H)

# sublayer_step(L): the tic step of an axis over L sublayers: every sublayer up to 16, else
# the power of two that leaves at most 16 labels (24 sublayers at M: every 2nd; 48 at L:
# every 4th), so that the labels stay apart
sublayer_step(L) = L <= 16 ? 1 : 2**ceil(log(L / 16.0) / log(2))

# nodata(msg): an empty panel that says why (use: eval nodata("..."); plot 2 notitle)
nodata(msg) = sprintf("set label 99 \"%s\" at graph 0.5, graph 0.5 center; set xrange [0:1]; set yrange [0:1]; unset xtics; unset ytics; unset key", msg)

# diverging palette for H_res heat maps: blue below 0, white at 0, red at 1
hres_palette = "set palette defined (-0.5 '#2166ac', 0 '#ffffff', 0.5 '#f4a582', 1 '#b2182b'); set cbrange [-0.5:1]"
