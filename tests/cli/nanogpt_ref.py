# nanoGPT's GPT forward, written from its model definition in plain Python (no numpy), on
# the tensors of a safetensors file that `s2hc export` wrote: the greedy continuation of
# a byte prompt, for tests/cli/export_cli.sh to compare with `s2hc sample --temperature 0`.
# Independent of s2hc's code: q | k | v split along c_attn's outputs, head h on channels
# [h hs, (h + 1) hs), causal softmax at 1/sqrt(hs), LayerNorm with eps 1e-5 (a bias only
# where the file has one), GELU as the run's config names it (erf: nn.GELU(); tanh:
# nn.GELU(approximate="tanh")), the head tied (lm_head.weight), the last block_size bytes.
# usage: nanogpt_ref.py FILE.safetensors PROMPT TOKENS
import json, math, os, struct, sys

def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    meta = h.pop("__metadata__")
    sd = {}
    for k, v in h.items():
        b, e = v["data_offsets"]
        vals = struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
        shape = v["shape"]
        if len(shape) == 2:
            r, c = shape
            vals = [list(vals[i * c:(i + 1) * c]) for i in range(r)]
        else:
            vals = list(vals)
        sd[k] = vals
    return sd, meta

def layernorm(x, w, b):
    m = sum(x) / len(x)
    var = sum((t - m) ** 2 for t in x) / len(x)
    r = 1.0 / math.sqrt(var + 1e-5)
    return [(t - m) * r * w[i] + (b[i] if b else 0.0) for i, t in enumerate(x)]

def linear(x, W, b):  # W is (out, in), as nn.Linear
    return [sum(wi * xi for wi, xi in zip(row, x)) + (b[o] if b else 0.0) for o, row in enumerate(W)]

def gelu(x, exact):
    if exact:
        return x * 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

def forward(sd, cfg, idx):
    C, L, H = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
    hs = C // H
    g = lambda k: sd.get(k)
    x = [[a + b for a, b in zip(sd["transformer.wte.weight"][t], sd["transformer.wpe.weight"][p])]
         for p, t in enumerate(idx)]
    T = len(idx)
    for l in range(L):
        pre = "transformer.h.%d." % l
        h = [layernorm(v, g(pre + "ln_1.weight"), g(pre + "ln_1.bias")) for v in x]
        qkv = [linear(v, g(pre + "attn.c_attn.weight"), g(pre + "attn.c_attn.bias")) for v in h]
        y = [[0.0] * C for _ in range(T)]
        for hd in range(H):
            for t in range(T):
                q = qkv[t][hd * hs:(hd + 1) * hs]
                s = [sum(a * b for a, b in zip(q, qkv[u][C + hd * hs:C + (hd + 1) * hs])) / math.sqrt(hs)
                     for u in range(t + 1)]
                mx = max(s)
                e = [math.exp(v - mx) for v in s]
                z = sum(e)
                for u in range(t + 1):
                    vv = qkv[u][2 * C + hd * hs:2 * C + (hd + 1) * hs]
                    for i in range(hs):
                        y[t][hd * hs + i] += e[u] / z * vv[i]
        a = [linear(v, g(pre + "attn.c_proj.weight"), g(pre + "attn.c_proj.bias")) for v in y]
        x = [[p + q for p, q in zip(u, v)] for u, v in zip(x, a)]
        h = [layernorm(v, g(pre + "ln_2.weight"), g(pre + "ln_2.bias")) for v in x]
        f = [[gelu(t, cfg["gelu"] == "erf") for t in linear(v, g(pre + "mlp.c_fc.weight"), g(pre + "mlp.c_fc.bias"))]
             for v in h]
        m = [linear(v, g(pre + "mlp.c_proj.weight"), g(pre + "mlp.c_proj.bias")) for v in f]
        x = [[p + q for p, q in zip(u, v)] for u, v in zip(x, m)]
    last = layernorm(x[-1], sd["transformer.ln_f.weight"], sd.get("transformer.ln_f.bias"))
    return linear(last, sd["lm_head.weight"], None)

def config(meta):
    cfg = {}
    sec = None
    for line in meta["config"].splitlines():
        if not line.startswith(" "):
            sec = line.rstrip(":")
            continue
        k, _, v = line.strip().partition(":")
        if sec == "model":
            v = v.strip()
            cfg[k] = int(v) if v.isdigit() else v
    return cfg

sd, meta = load(sys.argv[1])
cfg = config(meta)
assert meta["method"] == "rc", meta["method"]
toks = list(os.fsencode(sys.argv[2]))  # the prompt's bytes as given, whatever they are
for _ in range(int(sys.argv[3])):
    logits = forward(sd, cfg, toks[-cfg["block_size"]:])
    toks.append(max(range(len(logits)), key=lambda i: logits[i]))
sys.stdout.buffer.write(bytes(toks))  # bytes, as s2hc sample writes them
