"""Protocol tests of the bridge process: PYTHONPATH=python /usr/bin/python3 -m unittest discover -s python/tests

They talk to a real `python -m nlc_torch.bridge` over pipes, as the TypeScript client does.
"""
import json
import os
import struct
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pack(values):
    return struct.pack(f"<{len(values)}d", *values)


class Bridge:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
        self.p = subprocess.Popen([sys.executable, "-m", "nlc_torch.bridge"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def send_raw(self, header_bytes, payload=b""):
        self.p.stdin.write(header_bytes + payload)
        self.p.stdin.flush()

    def send(self, header, tensors=()):
        specs, blobs = [], []
        for name, shape, values in tensors:
            b = pack(values)
            specs.append({"name": name, "shape": shape, "nbytes": len(b)})
            blobs.append(b)
        self.send_raw(json.dumps(dict(header, tensors=specs)).encode() + b"\n", b"".join(blobs))
        return self.read()

    def read(self):
        h = json.loads(self.p.stdout.readline())
        out = {}
        for s in h["tensors"]:
            b = self.p.stdout.read(s["nbytes"])
            out[s["name"]] = (s["shape"], struct.unpack(f"<{s['nbytes'] // 8}d", b))
        return h, out

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


def level_params(d, seed=1.0):
    out = []
    for i, (n, shape) in enumerate([("W_K", [d, d]), ("W_V", [d, d]), ("W_Q", [d, d]), ("w_alpha", [2 * d]),
                                    ("b_alpha", [1]), ("w_theta", [2 * d]), ("b_theta", [1]), ("w_eta", [2 * d]),
                                    ("b_eta", [1])]):
        size = 1
        for x in shape:
            size *= x
        out.append((n, shape, [((j * 7 + i * 3) % 11 - 5) / (10.0 * seed) for j in range(size)]))
    return out


def model_case(d=2, s=3, V=4, k=2):
    model = [("params.model.W_embed", [V, d]), ("params.model.W_q", [d, d]), ("params.model.W_k", [d, d]),
             ("params.model.W_v", [d, d]), ("params.model.W_o", [d, d]), ("params.model.W_unembed", [d, V])]
    ts = []
    for i, (n, shape) in enumerate(model):
        size = shape[0] * shape[1]
        ts.append((n, shape, [((j * 5 + i) % 7 - 3) / 5.0 for j in range(size)]))
    for l in range(k):
        ts += [(f"params.levels.{l}.{n}", shape, v) for n, shape, v in level_params(d, 1.0 + l)]
    return ts


class ProtocolTest(unittest.TestCase):
    def setUp(self):
        self.b = Bridge()

    def tearDown(self):
        self.assertEqual(self.b.close(), 0)

    def test_hello(self):
        h, _ = self.b.send({"op": "hello", "id": "x"})
        self.assertTrue(h["ok"])
        self.assertEqual(h["id"], "x")
        self.assertIn("trellis.frozen", h["rules"])

    def test_rule_and_error_then_recovery(self):
        d, s = 2, 3
        ts = [("X", [s, d], [0.1 * i for i in range(s * d)]), ("dy", [s, d], [1.0] * (s * d))]
        ts += [(f"params.{n}", shape, v) for n, shape, v in level_params(d)]
        h, out = self.b.send({"op": "rule", "rule": "delta", "config": {"d": d, "seq_len": s}}, ts)
        self.assertTrue(h["ok"], h)
        self.assertEqual(out["y"][0], [s, d])
        self.assertIn("grads.state.M", out)
        # a tensor whose byte count disagrees with its shape: payload consumed, error names it
        bad = json.dumps({"op": "rule", "rule": "delta", "config": {"d": d, "seq_len": s},
                          "tensors": [{"name": "X", "shape": [s, d], "nbytes": 8}]}).encode() + b"\n"
        self.b.send_raw(bad, pack([1.0]))
        h2, _ = self.b.read()
        self.assertFalse(h2["ok"])
        self.assertIn("tensors.X.nbytes", h2["error"])
        # not JSON at all
        self.b.send_raw(b"{oops\n")
        h3, _ = self.b.read()
        self.assertFalse(h3["ok"])
        self.assertIn("header", h3["error"])
        # still in step
        h4, out4 = self.b.send({"op": "rule", "rule": "delta", "config": {"d": d, "seq_len": s}}, ts)
        self.assertTrue(h4["ok"])
        self.assertEqual(out4["y"], out["y"])

    def test_model_fixture_style_and_step(self):
        d, s, V = 2, 3, 4
        base = {"op": "model", "config": {"d": d, "seq_len": s, "vocab": V, "heads": 1, "window": 2},
                "input_ids": [0, 1, 3], "target_ids": [1, -1, 2]}
        h1, o1 = self.b.send(dict(base, rule="delta", k=2, chunk_sizes=[1, 8], active=[True, False]), model_case())
        self.assertTrue(h1["ok"], h1)
        self.assertEqual(h1["active"], [True, False])
        self.assertIn("error_buffers.1.W_Q", o1)
        self.assertNotIn("error_buffers.0.W_Q", o1)
        levels = [{"rule": "delta", "hyper": {}}, {"rule": "delta", "hyper": {}}]
        h2, o2 = self.b.send(dict(base, levels=levels, step=3), model_case())  # 3 % 8 != 0: level 1 frozen
        self.assertEqual(h2["active"], [True, False])
        self.assertEqual(o1["loss"], o2["loss"])
        h3, _ = self.b.send(dict(base, levels=levels, active=[True, True], target_ids=[1, 9, 2]), model_case())
        self.assertFalse(h3["ok"])
        self.assertIn("target_ids[1]", h3["error"])

    def test_shutdown(self):
        h, _ = self.b.send({"op": "shutdown"})
        self.assertTrue(h["ok"])


if __name__ == "__main__":
    unittest.main()
