"""wgcompute beside PyTorch in one process on the same device: matrix products, the seed's training step, a
convolution's forward and backward, and the training steps of the models in examples/, each timed in both.

    .venv/bin/python python/benches/peers.py [--adapter vulkan] [--runs 10] [--quick] [--large] [--json PATH]

Rows (each in wgcompute and in PyTorch):

* ``matmul N³``: an [N, N]·[N, N] product, N 1024 and 2048 (512 and 1024 with ``--quick``), 4096 too with
  ``--large`` or on a GPU adapter; GFLOP/s.
* ``seed x·W``: the seed's forward product x[10, 10000]·W[10000, 1000], and ``seed xᵀ·g`` its weight gradient
  ([10000, 10]·[10, 1000], ``wgcompute.matmul(x, g, transpose_a=True)`` and ``x.t() @ g``); GFLOP/s, and GB/s of
  the bytes each must move (both operands read once, the output written once).
* ``seed step``: a linear layer x[10, 10000]·W[10000, 1000] + bias, the mean softmax cross-entropy against
  one-hot labels (class ids in PyTorch), the gradient and one Adam step (lr 1e-3), the loss read back:
  ``wgcompute.nn.Linear`` under a ``GradientTape`` with ``wgcompute.optim.Adam``, and ``torch.nn.Linear`` with
  ``F.cross_entropy`` and ``torch.optim.Adam``; ms per step. x stays on the device (no upload in the step).
* ``conv2d fwd+bwd``: an NHWC image batch [32, 28, 28, 8] by a [3, 3, 8, 16] kernel ([kh, kw, in, out]),
  "same" padding, and the gradients to the image and the kernel from a given output gradient; PyTorch runs the
  same data in NCHW with the kernel permuted to [out, in, kh, kw]; ms.
* ``cnn_digits step`` and ``char_transformer step``: the models of examples/cnn_digits.py (batch 32 of 8×8×1)
  and examples/char_transformer.py (batch 32, context 32, width 64, 4 heads, 2 blocks), as
  python/benches/models.py times them (forward, backward, Adam, loss read back), and the same architectures
  written in torch.nn; ms per step.

Every figure is the median over ``--runs`` timed runs after two warm-up runs (the first tunes wgcompute's
kernels); each run ends with the device idle (``Session.sync()``; ``torch.cuda.synchronize()``). The matrix
products repeat inside one timed run until it lasts about 50 ms (as few as one), the same rule on both sides.

PyTorch runs on "cuda" when ``torch.cuda.is_available()``, else on the CPU, in float32 eager mode with TF32 off
(``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32`` False) and, on CUDA, again
with TF32 on; ``torch.backends.cudnn.benchmark`` is on (it picks a convolution algorithm per shape, as
wgcompute's tuner picks kernel variants). wgcompute runs on its default adapter (``--adapter``) under each
``matmul_precision`` ("highest", "high", "medium", or those of ``--precision``), and prints ``Session.info()``.
Each table pairs wgcompute's "highest" with PyTorch's TF32-off run and its lower precisions with the TF32 run
(where there is one; with "highest" alone, its rows are shown beside both). The ratio is >1 where wgcompute is
faster: wgcompute / PyTorch for rates, PyTorch / wgcompute for times.

Without PyTorch it prints "PyTorch not importable: wgcompute rows only" and wgcompute's rows; ``--json`` then
writes null for the peer.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from models import example, training  # python/benches/models.py, beside this script

import wgcompute as wg

PRECISIONS = ("highest", "high", "medium")
SEED_BATCH, SEED_INPUTS, SEED_CLASSES = 10, 10_000, 1_000
CONV_IMAGE, CONV_KERNEL = (32, 28, 28, 8), (3, 3, 8, 16)
# A matrix product repeats inside one timed run until the run lasts about this long.
TARGET_SECONDS = 0.05
MAX_REPEATS = 100

# name -> a dict of the row's figures: "seconds" always; "gflops" and "gbps" where the row has them.
Results = dict[str, dict[str, Any]]


# --- timing ---


def median_seconds(step: Callable[[], Any], sync: Callable[[], None], runs: int, warmup: int = 2) -> float:
    """Median seconds of ``step`` followed by ``sync``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        step()
        sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def repeated_seconds(product: Callable[[], Any], sync: Callable[[], None], runs: int) -> float:
    """Seconds of one call of ``product``: the median over ``runs`` timed runs, each ``repeats`` calls and one
    sync, ``repeats`` chosen so that a run lasts about TARGET_SECONDS."""
    for _ in range(2):
        product()
        sync()
    start = time.perf_counter()
    product()
    sync()
    once = time.perf_counter() - start
    repeats = max(1, min(MAX_REPEATS, int(TARGET_SECONDS / max(once, 1e-9))))

    def step() -> None:
        for _ in range(repeats):
            product()

    return median_seconds(step, sync, runs, warmup=0) / repeats


def product_figures(seconds: float, m: int, k: int, n: int, with_bytes: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {"seconds": seconds, "gflops": 2.0 * m * k * n / seconds / 1e9}
    if with_bytes:
        # Both operands read once and the output written once, float32.
        figures["gbps"] = 4.0 * (m * k + k * n + m * n) / seconds / 1e9
    return figures


def product_rows(
    results: Results,
    data: Data,
    sizes: list[int],
    runs: int,
    upload: Callable[[np.ndarray], Any],
    sync: Callable[[], None],
    transposed_left: Callable[[Any, Any], Any],
) -> None:
    """The product rows, written once for both libraries: square products at ``sizes``, the seed's forward
    product x·W and its weight gradient xᵀ·g (``transposed_left(x, g)``), each with ``upload``'s tensors."""
    for n in sizes:

        def square(n: int = n) -> dict[str, Any]:
            a_host, b_host = data.square(n)
            a, b = upload(a_host), upload(b_host)
            return product_figures(repeated_seconds(lambda: a @ b, sync, runs), n, n, n, False)

        guarded(results, f"matmul {n}³", square)

    x, w, g = upload(data.seed_x), upload(data.seed_w), upload(data.seed_g)
    guarded(
        results,
        "seed x·W",
        lambda: product_figures(
            repeated_seconds(lambda: x @ w, sync, runs), SEED_BATCH, SEED_INPUTS, SEED_CLASSES, True
        ),
    )
    guarded(
        results,
        "seed xᵀ·g",
        lambda: product_figures(
            repeated_seconds(lambda: transposed_left(x, g), sync, runs), SEED_INPUTS, SEED_BATCH, SEED_CLASSES, True
        ),
    )


def matmul_sizes(quick: bool, large: bool, on_gpu: bool) -> list[int]:
    sizes = [512, 1024] if quick else [1024, 2048]
    if large or (on_gpu and not quick):
        sizes.append(4096)
    return sizes


def guarded(results: Results, name: str, measure: Callable[[], dict[str, Any]]) -> None:
    """Runs one row's measurement into ``results``; a failure is recorded (and printed), not raised, so that
    the other rows still run."""
    try:
        results[name] = measure()
        shown = ", ".join(
            f"{results[name][key] * scale:.4g} {unit}"
            for key, unit, scale in (("gflops", "GFLOP/s", 1.0), ("gbps", "GB/s", 1.0), ("seconds", "ms", 1e3))
            if key in results[name]
        )
        print(f"  {name}: {shown}", flush=True)
    except Exception as error:  # noqa: BLE001 - a row that fails must not lose the others
        message = f"{type(error).__name__}: {error}"
        print(f"  {name}: failed: {message[:300]}", flush=True)
        results[name] = {"error": message}


# --- the data both sides share ---


class Data:
    """The host arrays both libraries start from, so that both compute on the same numbers."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.seed_x = rng.random((SEED_BATCH, SEED_INPUTS), dtype=np.float32)
        self.seed_w = rng.standard_normal((SEED_INPUTS, SEED_CLASSES), dtype=np.float32)
        self.seed_g = rng.standard_normal((SEED_BATCH, SEED_CLASSES), dtype=np.float32)
        self.seed_ids = rng.integers(0, SEED_CLASSES, SEED_BATCH)
        self.conv_x = rng.random(CONV_IMAGE, dtype=np.float32)
        self.conv_k = (rng.standard_normal(CONV_KERNEL, dtype=np.float32) * 0.1).astype(np.float32)
        batch, height, width, _ = CONV_IMAGE
        self.conv_g = rng.standard_normal((batch, height, width, CONV_KERNEL[3]), dtype=np.float32)
        self.cnn_x = rng.random((32, 8, 8, 1), dtype=np.float32)
        self.cnn_ids = rng.integers(0, 10, 32)
        self.chars = example("char_transformer")
        self.chars_vocab = len(self.chars.vocabulary())
        self.chars_ids = rng.integers(0, self.chars_vocab, (32, 33))

    def square(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(n)
        return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


# --- wgcompute ---


def wgcompute_rows(session: wg.Session, data: Data, sizes: list[int], runs: int) -> Results:
    results: Results = {}
    sync = session.sync

    x = session.tensor(data.seed_x)
    product_rows(results, data, sizes, runs, session.tensor, sync, lambda a, b: wg.matmul(a, b, transpose_a=True))

    def seed_step() -> dict[str, Any]:
        layer = wg.nn.Linear(session, SEED_INPUTS, SEED_CLASSES, seed=1)
        labels = session.tensor(np.eye(SEED_CLASSES, dtype=np.float32)[data.seed_ids])
        step = training(layer.parameters(), lambda: layer(x), labels, None)
        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "seed step", seed_step)

    def conv() -> dict[str, Any]:
        image = session.tensor(data.conv_x)
        kernel = session.variable(data.conv_k, name="kernel")
        seed = session.tensor(data.conv_g)

        def step() -> None:
            with wg.GradientTape() as tape:
                tape.watch(image)
                y = wg.conv2d(image, kernel, padding="same")
            tape.gradient(y, [image, kernel], output_gradients=seed)

        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "conv2d fwd+bwd", conv)

    def cnn_step() -> dict[str, Any]:
        model = example("cnn_digits").build_model(session, seed=0)
        images = session.tensor(data.cnn_x)
        labels = session.tensor(np.eye(10, dtype=np.float32)[data.cnn_ids])
        step = training(model.parameters(), lambda: model(images, training=True), labels, None)
        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "cnn_digits step", cnn_step)

    def transformer_step() -> dict[str, Any]:
        vocab = data.chars_vocab
        model = data.chars.CharTransformer(session, vocab, context=32, dim=64, heads=4, layers=2, seed=0)
        ids = data.chars_ids.astype(np.uint32)
        inputs = session.tensor(ids[:, :-1])
        labels = session.tensor(np.eye(vocab, dtype=np.float32)[ids[:, 1:].reshape(-1)])
        step = training(model.parameters(), lambda: model(inputs, training=True), labels, vocab)
        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "char_transformer step", transformer_step)
    return results


# --- PyTorch ---


def torch_device_name(torch: Any, device: str) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    return cpu_name()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torch_modes(torch: Any, device: str) -> list[str]:
    """The PyTorch runs: TF32 off ("fp32") always, and TF32 on ("tf32") on CUDA."""
    return ["fp32", "tf32"] if device == "cuda" else ["fp32"]


def set_torch_mode(torch: Any, mode: str) -> None:
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def torch_models(torch: Any, vocab: int) -> tuple[Any, Any]:
    """The digits CNN and the character transformer of examples/, in torch.nn (NCHW for the CNN)."""
    nn = torch.nn

    def cnn(width: int = 16) -> Any:
        # cnn_digits.build_model: conv·BatchNorm·relu, conv·relu·maxpool, dropout, flatten, linear. Keras's
        # BatchNormalization momentum 0.99 is PyTorch's 0.01.
        return nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.BatchNorm2d(width, eps=1e-3, momentum=0.01),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
            nn.Flatten(),
            nn.Linear(4 * 4 * 2 * width, 10),
        )

    class Block(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(dim)
            self.up = nn.Linear(dim, 4 * dim)
            self.gelu = nn.GELU()
            self.down = nn.Linear(4 * dim, dim)

        def forward(self, x: Any, mask: Any) -> Any:
            h = self.norm1(x)
            x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.down(self.gelu(self.up(self.norm2(x))))

    class CharTransformer(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, context: int = 32, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
            super().__init__()
            self.token = nn.Embedding(vocab, dim)
            self.position = nn.Embedding(context, dim)
            self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, ids: Any) -> Any:
            length = ids.shape[1]
            positions = torch.arange(length, device=ids.device)
            # True above the diagonal: a position attends to itself and earlier ones only.
            mask = torch.triu(torch.ones(length, length, dtype=torch.bool, device=ids.device), diagonal=1)
            x = self.token(ids) + self.position(positions)
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.norm(x))

    return cnn, CharTransformer


def torch_training(torch: Any, model: Any, x: Any, targets: Any, flat: int | None) -> Callable[[], None]:
    functional = torch.nn.functional
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        if flat is not None:
            logits = logits.reshape(-1, flat)
        loss = functional.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        loss.item()

    return step


def torch_rows(torch: Any, device: str, data: Data, sizes: list[int], runs: int) -> Results:
    results: Results = {}
    functional = torch.nn.functional

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def upload(array: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(array)).to(device)

    torch.manual_seed(0)
    with torch.no_grad():
        product_rows(results, data, sizes, runs, upload, sync, lambda a, b: a.t() @ b)
        x = upload(data.seed_x)

    def seed_step() -> dict[str, Any]:
        layer = torch.nn.Linear(SEED_INPUTS, SEED_CLASSES).to(device)
        labels = upload(data.seed_ids.astype(np.int64))
        return {"seconds": median_seconds(torch_training(torch, layer, x, labels, None), sync, runs)}

    guarded(results, "seed step", seed_step)

    def conv() -> dict[str, Any]:
        # NHWC to NCHW; [kh, kw, in, out] to [out, in, kh, kw].
        image = upload(data.conv_x).permute(0, 3, 1, 2).contiguous().requires_grad_(True)
        kernel = upload(data.conv_k).permute(3, 2, 0, 1).contiguous().requires_grad_(True)
        seed = upload(data.conv_g).permute(0, 3, 1, 2).contiguous()

        def step() -> None:
            y = functional.conv2d(image, kernel, padding=1)
            torch.autograd.grad(y, (image, kernel), grad_outputs=seed)

        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "conv2d fwd+bwd", conv)

    cnn, char_transformer = torch_models(torch, data.chars_vocab)

    def cnn_step() -> dict[str, Any]:
        model = cnn().to(device)
        images = upload(data.cnn_x).permute(0, 3, 1, 2).contiguous()
        labels = upload(data.cnn_ids.astype(np.int64))
        return {"seconds": median_seconds(torch_training(torch, model, images, labels, None), sync, runs)}

    guarded(results, "cnn_digits step", cnn_step)

    def transformer_step() -> dict[str, Any]:
        model = char_transformer().to(device)
        ids = data.chars_ids.astype(np.int64)
        inputs = upload(ids[:, :-1])
        targets = upload(ids[:, 1:].reshape(-1))
        step = torch_training(torch, model, inputs, targets, data.chars_vocab)
        return {"seconds": median_seconds(step, sync, runs)}

    guarded(results, "char_transformer step", transformer_step)
    return results


def check_agreement(torch: Any, device: str, data: Data, session: wg.Session) -> dict[str, float]:
    """The largest relative difference between the two libraries' seed product and convolution (forward), on
    the same data: a check that both rows compute the same thing (layouts, permutations)."""

    def relative(ours: np.ndarray, theirs: np.ndarray) -> float:
        return float(np.abs(ours - theirs).max() / max(float(np.abs(theirs).max()), 1e-30))

    with torch.no_grad():
        x, w = torch.from_numpy(data.seed_x).to(device), torch.from_numpy(data.seed_w).to(device)
        theirs_product = (x @ w).cpu().numpy()
        image = torch.from_numpy(data.conv_x).to(device).permute(0, 3, 1, 2)
        kernel = torch.from_numpy(data.conv_k).to(device).permute(3, 2, 0, 1)
        theirs_conv = torch.nn.functional.conv2d(image, kernel, padding=1).permute(0, 2, 3, 1).cpu().numpy()
    ours_product = (session.tensor(data.seed_x) @ session.tensor(data.seed_w)).numpy()
    ours_conv = wg.conv2d(session.tensor(data.conv_x), session.tensor(data.conv_k), padding="same").numpy()
    return {"seed x·W": relative(ours_product, theirs_product), "conv2d": relative(ours_conv, theirs_conv)}


# --- the table ---


def units_of(name: str) -> list[tuple[str, str, bool]]:
    """(figure key, unit, is a rate) of each figure a row shows: the products' GFLOP/s (and the seed's
    products' GB/s), else milliseconds."""
    if name.startswith("matmul"):
        return [("gflops", "GFLOP/s", True)]
    if name.startswith("seed x"):
        return [("gflops", "GFLOP/s", True), ("gbps", "GB/s", True)]
    return [("seconds", "ms", False)]


def figure(results: Results | None, name: str, key: str) -> float | None:
    value = (results or {}).get(name, {}).get(key)
    if value is None:
        return None
    return float(value) * (1e3 if key == "seconds" else 1.0)


def pairings(precisions: list[str], modes: list[str]) -> list[tuple[str, str | None]]:
    """(wgcompute precision, PyTorch mode) of each table: highest with TF32 off, lower precisions with TF32 on
    where PyTorch has it; "highest" alone is shown beside every PyTorch mode."""
    if not modes:
        return [(precision, None) for precision in precisions]
    lower = [p for p in precisions if p != "highest"]
    pairs: list[tuple[str, str | None]] = []
    for precision in precisions:
        if precision == "highest":
            pairs.append((precision, "fp32"))
            if not lower and "tf32" in modes:
                pairs.append((precision, "tf32"))
        else:
            pairs.append((precision, "tf32" if "tf32" in modes else "fp32"))
    return pairs


def ratio(ours: float | None, theirs: float | None, is_rate: bool) -> float | None:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return ours / theirs if is_rate else theirs / ours


def number(value: float | None, width: int = 11) -> str:
    if value is None:
        return f"{'—':>{width}}"
    return f"{value:>{width}.3f}" if value < 100 else f"{value:>{width}.1f}"


def print_table(
    names: list[str],
    ours: dict[str, Results],
    theirs: dict[str, Results] | None,
    pairs: list[tuple[str, str | None]],
    labels: dict[str, str],
) -> list[dict[str, Any]]:
    """Prints one table per pairing; returns its lines as JSON rows."""
    json_rows = []
    for key, mode in pairs:
        peer = "PyTorch (not importable)" if mode is None else f"PyTorch {labels[mode]}"
        print(f"\nwgcompute matmul_precision={key}  vs  {peer}")
        print(f"{'row':26} {'unit':>8} {'wgcompute':>11} {'PyTorch':>11} {'ratio':>8}")
        their_results = None if theirs is None or mode is None else theirs[mode]
        for name in names:
            for figure_key, unit, is_rate in units_of(name):
                value = figure(ours[key], name, figure_key)
                other = figure(their_results, name, figure_key)
                factor = ratio(value, other, is_rate)
                notes = [
                    f"{side}: {row[what][:60]}"
                    for side, row in (
                        ("wgcompute", ours[key].get(name, {})),
                        ("PyTorch", (their_results or {}).get(name, {})),
                    )
                    for what in ("error",)
                    if what in row
                ]
                line = f"{name:26} {unit:>8} {number(value)} {number(other)} {number(factor, 8)}"
                print(line + (f"   ({'; '.join(notes)})" if notes else ""))
                json_rows.append(
                    {
                        "row": name,
                        "unit": unit,
                        "wgcompute_precision": key,
                        "pytorch_mode": mode,
                        "wgcompute": value,
                        "pytorch": other,
                        "ratio": factor,
                    }
                )
    return json_rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None, help="wgcompute's adapter: an index, backend, type or name")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per row (default 10, 3 with --quick)")
    parser.add_argument("--quick", action="store_true", help="fewer runs, products of 512³ and 1024³ only")
    parser.add_argument("--large", action="store_true", help="the 4096³ product too (always on a GPU adapter)")
    parser.add_argument(
        "--precision", action="append", choices=PRECISIONS, help="only this matmul_precision (repeatable)"
    )
    parser.add_argument("--no-torch", action="store_true", help="wgcompute's rows only")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 10)
    adapter: int | str | None = int(args.adapter) if args.adapter and args.adapter.isdigit() else args.adapter
    started = time.perf_counter()

    torch: Any = None
    if not args.no_torch:
        try:
            torch = importlib.import_module("torch")  # the peer, optional
        except Exception as error:  # ImportError, or a CUDA library that fails to load
            print(f"PyTorch not importable: wgcompute rows only ({type(error).__name__}: {error})")
    data = Data()

    ours: dict[str, Results] = {}
    infos: dict[str, Any] = {}
    adapter_info: dict[str, Any] | None = None
    sizes: list[int] | None = None
    precisions: list[str] = args.precision or list(PRECISIONS)
    agreement: dict[str, float] | None = None
    for precision in precisions:
        try:
            session = wg.Session(adapter=adapter, matmul_precision=precision)
        except (wg.Error, TypeError, ValueError) as error:
            print(f"wgcompute matmul_precision={precision}: the Session refused it ({type(error).__name__}: {error})")
            continue
        with session:
            adapter_info = session.adapter
            infos[precision] = session.info()
            print(f"wgcompute matmul_precision={precision}: session.info() = {infos[precision]}", flush=True)
            if sizes is None:
                sizes = matmul_sizes(args.quick, args.large, adapter_info.get("device_type") != "cpu")
            ours[precision] = wgcompute_rows(session, data, sizes, runs)
            if torch is not None and agreement is None and precision == "highest":
                device = "cuda" if torch.cuda.is_available() else "cpu"
                try:
                    agreement = check_agreement(torch, device, data, session)
                except Exception as error:  # the check is a note beside the figures, not one of them
                    print(f"agreement check failed: {type(error).__name__}: {error}")
    if not ours:
        sys.exit("no wgcompute session opened")
    assert sizes is not None and adapter_info is not None

    theirs: dict[str, Results] | None = None
    peer: dict[str, Any] | None = None
    labels = {"fp32": "float32, TF32 off", "tf32": "float32, TF32 on"}
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        theirs = {}
        for mode in torch_modes(torch, device):
            set_torch_mode(torch, mode)
            print(f"PyTorch {labels[mode]} on {device}", flush=True)
            theirs[mode] = torch_rows(torch, device, data, sizes, runs)
        set_torch_mode(torch, "fp32")
        peer = {
            "version": torch.__version__,
            "device": device,
            "device_name": torch_device_name(torch, device),
            "threads": torch.get_num_threads(),
            "runs": theirs,
            "agreement": agreement,
        }

    names = [f"matmul {n}³" for n in sizes] + [
        "seed x·W",
        "seed xᵀ·g",
        "seed step",
        "conv2d fwd+bwd",
        "cnn_digits step",
        "char_transformer step",
    ]
    print(f"\nwgcompute {getattr(wg, '__version__', '')} on {adapter_info['name']} ({adapter_info['backend']})")
    if peer is None:
        print("PyTorch: not importable")
    else:
        print(f"PyTorch {peer['version']} on {peer['device']}: {peer['device_name']} ({peer['threads']} threads)")
        if agreement:
            print(
                "same results (largest relative difference): " + ", ".join(f"{k} {v:.1e}" for k, v in agreement.items())
            )
    print(f"median of {runs} runs; ratio > 1: wgcompute faster")
    pairs = pairings([p for p in precisions if p in ours], list(theirs or {}))
    table = print_table(names, ours, theirs, pairs, labels)
    seconds = time.perf_counter() - started
    print(f"\n{seconds:.1f} s in all")
    if args.json:
        report = {
            "wgcompute": {"adapter": adapter_info, "info": infos, "runs": ours},
            "pytorch": peer,
            "table": table,
            "matmul_sizes": sizes,
            "runs": runs,
            "quick": args.quick,
            "python": sys.version.split()[0],
            "seconds": seconds,
        }
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1, default=str)
            out.write("\n")


if __name__ == "__main__":
    main()
