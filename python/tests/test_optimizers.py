"""Keras's optimizers (Adam with weight decay, RMSprop, Adagrad, Adamax, Nadam, Lion) and SGD's Nesterov momentum
against their formulas in float64 over several steps, with weight decay and Keras's gradient clipping; the learning-rate
schedules against their formulas at many steps; an optimizer taking its rate from a schedule; bad settings
refused; an optimizer used after its session closes."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import wgcompute as wg
from wgcompute.optim import schedules
from wgcompute.optim._rules import RULE_CLASSES

# One element, a prime, a ragged vec4 just over a workgroup's vec4s.
SHAPES = [(1,), (7,), (1025,)]
STEPS = 5


def f64(array):
    return np.asarray(array, dtype=np.float64)


def gradients_for(rng, steps):
    # A different scale each step, so the moments are no plain averages.
    return [
        [(rng.uniform(-1, 1, shape) * 10.0 ** rng.uniform(-1, 0.5)).astype(np.float32) for shape in SHAPES]
        for _ in range(steps)
    ]


def run(session, optimizer, starts, gradients):
    variables = [session.variable(start) for start in starts]
    for step in gradients:
        optimizer.step(variables, [session.tensor(g) for g in step])
    return [variable.numpy() for variable in variables]


def nadam_u(beta_1, t):
    return beta_1 * (1 - 0.5 * 0.96 ** (t * 0.004))


# Each rule's float64 step, Keras 3's formula, registered with Keras's defaults: a rule of the library's table is
# one place here. A step reads the float32-rounded settings `f32`, the rate `lr` and the step `t`, and updates the
# variable `p` (returned) and its state `s` (three arrays, in place).
RULES = {}


def keras_rule(name, **keras_defaults):
    def register(step):
        RULES[name] = (keras_defaults, step)
        return step

    return register


@keras_rule("rmsprop", rho=0.9, momentum=0.0, epsilon=1e-7, centered=False)
def _rmsprop(f32, lr, t, p, g, s):
    rho, momentum, eps = f32["rho"], f32["momentum"], f32["epsilon"]
    s[0] = rho * s[0] + (1 - rho) * g**2
    if f32["centered"]:
        s[2] = rho * s[2] + (1 - rho) * g
        denominator = s[0] - s[2] ** 2 + eps
    else:
        denominator = s[0] + eps
    increment = lr * g / np.sqrt(denominator)
    if momentum > 0:
        s[1] = momentum * s[1] + increment
        return p - s[1]
    return p - increment


@keras_rule("adagrad", initial_accumulator_value=0.1, epsilon=1e-7)
def _adagrad(f32, lr, t, p, g, s):
    s[0] = s[0] + g**2
    return p - lr * g / np.sqrt(s[0] + f32["epsilon"])


@keras_rule("adam", beta_1=0.9, beta_2=0.999, epsilon=1e-7)
def _adam(f32, lr, t, p, g, s):
    b1, b2 = f32["beta_1"], f32["beta_2"]
    alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
    s[0] = s[0] + (g - s[0]) * (1 - b1)
    s[1] = s[1] + (g**2 - s[1]) * (1 - b2)
    return p - s[0] * alpha / (np.sqrt(s[1]) + f32["epsilon"])


@keras_rule("adamax", beta_1=0.9, beta_2=0.999, epsilon=1e-7)
def _adamax(f32, lr, t, p, g, s):
    b1, b2 = f32["beta_1"], f32["beta_2"]
    s[0] = s[0] + (g - s[0]) * (1 - b1)
    s[1] = np.maximum(b2 * s[1], np.abs(g))
    return p - lr * s[0] / ((1 - b1**t) * (s[1] + f32["epsilon"]))


@keras_rule("nadam", beta_1=0.9, beta_2=0.999, epsilon=1e-7)
def _nadam(f32, lr, t, p, g, s):
    b1, b2 = f32["beta_1"], f32["beta_2"]
    u_t, u_next = nadam_u(b1, t), nadam_u(b1, t + 1)
    product = math.prod(nadam_u(b1, step) for step in range(1, t + 1))
    s[0] = s[0] + (g - s[0]) * (1 - b1)
    s[1] = s[1] + (g**2 - s[1]) * (1 - b2)
    m_hat = u_next * s[0] / (1 - product * u_next) + (1 - u_t) * g / (1 - product)
    v_hat = s[1] / (1 - b2**t)
    return p - m_hat * lr / (np.sqrt(v_hat) + f32["epsilon"])


@keras_rule("adadelta", rho=0.95, epsilon=1e-7)
def _adadelta(f32, lr, t, p, g, s):
    rho, eps = f32["rho"], f32["epsilon"]
    s[0] = rho * s[0] + (1 - rho) * g**2
    delta = -np.sqrt(s[1] + eps) * g / np.sqrt(s[0] + eps)
    s[1] = rho * s[1] + (1 - rho) * delta**2
    return p + lr * delta


@keras_rule(
    "ftrl",
    learning_rate_power=-0.5,
    initial_accumulator_value=0.1,
    l1_regularization_strength=0.0,
    l2_regularization_strength=0.0,
    l2_shrinkage_regularization_strength=0.0,
    beta=0.0,
)
def _ftrl(f32, lr, t, p, g, s):
    power = -f32["learning_rate_power"]
    l1, l2, shrinkage = (
        f32["l1_regularization_strength"],
        f32["l2_regularization_strength"],
        f32["l2_shrinkage_regularization_strength"],
    )
    l2_reg = l2 + f32["beta"] / (2 * lr)
    accumulator = s[0] + g**2
    s[1] = s[1] + g + 2 * shrinkage * p - (np.power(accumulator, power) - np.power(s[0], power)) / lr * p
    quadratic = np.power(accumulator, power) / lr + 2 * l2_reg
    s[0] = accumulator
    return (np.clip(s[1], -l1, l1) - s[1]) / quadratic


@keras_rule("lion", beta_1=0.9, beta_2=0.99)
def _lion(f32, lr, t, p, g, s):
    b1, b2 = f32["beta_1"], f32["beta_2"]
    p = p - lr * np.sign(b1 * s[0] + (1 - b1) * g)
    s[0] = b2 * s[0] + (1 - b2) * g
    return p


@keras_rule("sgd", momentum=0.0, nesterov=False)
def _sgd(f32, lr, t, p, g, s):
    momentum = f32["momentum"]
    s[0] = momentum * s[0] + g
    return p - lr * (g + momentum * s[0] if f32["nesterov"] else s[0])


def reference(name, settings, starts, gradients):
    """Keras 3's update rules in float64 (after its decoupled weight decay), one variable at a time."""
    assert name in RULES, f"no float64 reference for the optimizer {name!r}: add its formula here"
    step = RULES[name][1]
    f32 = {key: float(np.float32(value)) if isinstance(value, float) else value for key, value in settings.items()}
    lr, wd = f32["learning_rate"], f32.get("weight_decay") or 0.0
    results = []
    for index, start in enumerate(starts):
        p = f64(start)
        # Adagrad's and FTRL's accumulators start at their setting; every other slot at 0.
        s = [np.full(p.shape, f32.get("initial_accumulator_value", 0.0)), np.zeros(p.shape), np.zeros(p.shape)]
        for t, gradient in enumerate(gradients, start=1):
            p = p - p * wd * lr
            p = step(f32, lr, t, p, f64(gradient[index]), s)
        results.append(p)
    return results


CASES = {
    "rmsprop": (wg.optim.RMSprop, {"learning_rate": 0.01}),
    "rmsprop momentum centered decayed": (
        wg.optim.RMSprop,
        {"learning_rate": 0.005, "rho": 0.8, "momentum": 0.5, "epsilon": 1e-3, "centered": True, "weight_decay": 0.1},
    ),
    "rmsprop centered": (wg.optim.RMSprop, {"learning_rate": 0.01, "centered": True, "epsilon": 1e-3}),
    "adagrad": (wg.optim.Adagrad, {"learning_rate": 0.1}),
    "adagrad decayed": (
        wg.optim.Adagrad,
        {"learning_rate": 0.05, "initial_accumulator_value": 0.5, "epsilon": 1e-3, "weight_decay": 0.2},
    ),
    "adam decayed": (
        wg.optim.Adam,
        {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-3, "weight_decay": 0.1},
    ),
    "adam keras defaults decayed": (wg.optim.Adam, {"learning_rate": 0.01, "epsilon": 1e-7, "weight_decay": 0.004}),
    "adamax": (wg.optim.Adamax, {"learning_rate": 0.01}),
    "adamax decayed": (
        wg.optim.Adamax,
        {"learning_rate": 0.02, "beta_1": 0.7, "beta_2": 0.9, "epsilon": 1e-3, "weight_decay": 0.1},
    ),
    "nadam": (wg.optim.Nadam, {"learning_rate": 0.01}),
    "nadam decayed": (
        wg.optim.Nadam,
        {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-3, "weight_decay": 0.1},
    ),
    "lion": (wg.optim.Lion, {"learning_rate": 0.001}),
    "lion decayed": (wg.optim.Lion, {"learning_rate": 0.01, "beta_1": 0.5, "beta_2": 0.9, "weight_decay": 0.3}),
    "ftrl regularized": (
        wg.optim.Ftrl,
        {
            "learning_rate": 0.05,
            "learning_rate_power": -0.7,
            "l1_regularization_strength": 0.01,
            "l2_regularization_strength": 0.1,
            "l2_shrinkage_regularization_strength": 0.05,
            "beta": 0.5,
            "weight_decay": 0.1,
        },
    ),
    "adadelta decayed": (wg.optim.Adadelta, {"learning_rate": 1.0, "rho": 0.9, "epsilon": 1e-6, "weight_decay": 0.05}),
    "sgd nesterov": (wg.optim.SGD, {"learning_rate": 0.05, "momentum": 0.9, "nesterov": True}),
    "sgd nesterov decayed": (
        wg.optim.SGD,
        {"learning_rate": 0.1, "momentum": 0.5, "nesterov": True, "weight_decay": 0.2},
    ),
}

KERAS_DEFAULTS = {name: keras_defaults for name, (keras_defaults, _) in RULES.items()}


@pytest.mark.parametrize("kind", sorted(RULE_CLASSES))
def test_every_rule_of_the_table_has_kerass_defaults_and_follows_its_reference(session, rng, kind):
    """Each class made from a row of the library's table of rules: its signature's defaults are Keras's, and its
    update at them is its formula's."""
    assert kind in KERAS_DEFAULTS, f"the rule {kind!r} has no Keras defaults (and so no reference) here"
    make = RULE_CLASSES[kind]
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(make).parameters.items()
        if name not in ("learning_rate", "weight_decay", "clipnorm", "clipvalue", "global_clipnorm")
    }
    assert defaults == KERAS_DEFAULTS[kind]
    assert inspect.signature(make).parameters["learning_rate"].default == 0.001
    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, STEPS)
    got = run(session, make(learning_rate=0.01), starts, gradients)
    want = reference(kind, {**KERAS_DEFAULTS[kind], "learning_rate": 0.01}, starts, gradients)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{kind}, variable {index}")


@pytest.mark.parametrize("case", CASES)
def test_each_update_follows_kerass_formula(session, rng, case):
    make, settings = CASES[case]
    name = case.split()[0]
    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, STEPS)
    got = run(session, make(**settings), starts, gradients)
    want = reference(name, {**KERAS_DEFAULTS[name], **settings}, starts, gradients)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{case}, variable {index}")


def clip_reference(gradients, clipnorm=None, global_clipnorm=None, clipvalue=None):
    clipped = []
    for step in gradients:
        step = [f64(g) for g in step]
        if clipnorm is not None:
            step = [g * clipnorm / max(np.sqrt((g**2).sum()), clipnorm) for g in step]
        elif global_clipnorm is not None:
            total = np.sqrt(sum((g**2).sum() for g in step))
            step = [g * global_clipnorm / max(total, global_clipnorm) for g in step]
        if clipvalue is not None:
            step = [np.clip(g, -clipvalue, clipvalue) for g in step]
        clipped.append(step)
    return clipped


@pytest.mark.parametrize(
    "clipping",
    [{"clipnorm": 0.5}, {"global_clipnorm": 1.0}, {"clipvalue": 0.1}, {"clipnorm": 2.0, "clipvalue": 0.3}],
    ids=["clipnorm", "global_clipnorm", "clipvalue", "clipnorm and clipvalue"],
)
@pytest.mark.parametrize("name", ["sgd", "rmsprop"])
def test_gradients_are_clipped_as_keras_clips_them(session, rng, clipping, name):
    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, STEPS)
    settings = {"learning_rate": 0.05}
    make = wg.optim.SGD if name == "sgd" else wg.optim.RMSprop
    optimizer = make(**settings, **clipping)
    got = run(session, optimizer, starts, gradients)
    want = reference(name, {**KERAS_DEFAULTS[name], **settings}, starts, clip_reference(gradients, **clipping))
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{clipping}, variable {index}")
    # The limits do bind: without them the variables end elsewhere.
    unclipped = run(session, make(**settings), starts, gradients)
    assert any(not np.allclose(a, b, rtol=1e-4) for a, b in zip(got, unclipped, strict=True))


def test_kerass_spellings_are_aliases_and_a_setting_is_given_once(session, rng):
    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, 3)
    ours = run(session, wg.optim.Adam(0.01, 0.8, 0.99, 1e-3), starts, gradients)
    kerass = run(session, wg.optim.Adam(learning_rate=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-3), starts, gradients)
    for a, b in zip(ours, kerass, strict=True):
        np.testing.assert_array_equal(a, b)
    for twice in ({"beta1": 0.8, "beta_1": 0.7}, {"eps": 1e-3, "epsilon": 1e-4}):
        with pytest.raises(wg.InvalidArgumentError, match="give it once"):
            wg.optim.Adam(**twice)


BAD = [
    (wg.optim.RMSprop, {"rho": 1.0}),
    (wg.optim.RMSprop, {"momentum": -0.5}),
    (wg.optim.RMSprop, {"learning_rate": 0.0}),
    (wg.optim.Adagrad, {"initial_accumulator_value": -1.0}),
    (wg.optim.Adagrad, {"epsilon": float("nan")}),
    (wg.optim.Adamax, {"beta_1": 1.0}),
    (wg.optim.Nadam, {"beta_2": -0.1}),
    (wg.optim.Lion, {"beta_1": 0.0}),
    (wg.optim.Lion, {"learning_rate": float("inf")}),
    (wg.optim.Lion, {"weight_decay": -1.0}),
    (wg.optim.Adam, {"weight_decay": -0.1}),
    (wg.optim.SGD, {"weight_decay": -0.1}),
    (wg.optim.SGD, {"clipnorm": 1.0, "global_clipnorm": 1.0}),
    (wg.optim.Adam, {"clipnorm": 0.0}),
    (wg.optim.Nadam, {"clipvalue": -1.0}),
    (wg.optim.AdamW, {"global_clipnorm": float("nan")}),
    (wg.optim.RMSprop, {"learning_rate": "fast"}),
]


@pytest.mark.parametrize(("make", "settings"), BAD, ids=[f"{make.__name__} {settings}" for make, settings in BAD])
def test_bad_settings_are_refused(make, settings):
    with pytest.raises(wg.InvalidArgumentError):
        make(**settings)


def test_a_bad_learning_rate_set_later_is_refused_and_the_old_one_kept():
    optimizer = wg.optim.Adamax(learning_rate=0.01)
    with pytest.raises(wg.InvalidArgumentError):
        optimizer.learning_rate = -1.0
    assert optimizer.learning_rate == pytest.approx(0.01)


@pytest.mark.parametrize("make", list(RULE_CLASSES.values()), ids=list(RULE_CLASSES))
def test_an_optimizer_used_after_its_session_closes_raises(make_session, adapter, rng, make):
    closed = make_session(adapter)
    variable, gradient = (
        closed.variable(rng.uniform(-1, 1, (5,)).astype(np.float32)),
        closed.tensor(np.ones(5, np.float32)),
    )
    optimizer = make()
    optimizer.step([variable], [gradient])
    closed.close()
    with pytest.raises(wg.SessionClosedError):
        optimizer.step([variable], [gradient])
    assert optimizer.iterations == 1


# --- schedules ---


def test_schedules_follow_kerass_formulas_at_many_steps():
    steps = list(range(0, 400, 7)) + [99, 100, 101, 199, 200, 201]
    exponential = schedules.ExponentialDecay(0.1, 50, 0.5)
    stair = schedules.ExponentialDecay(0.1, 50, 0.5, staircase=True)
    inverse = schedules.InverseTimeDecay(0.1, 20, 0.5)
    inverse_stair = schedules.InverseTimeDecay(0.1, 20, 0.5, staircase=True)
    polynomial = schedules.PolynomialDecay(0.1, 100, end_learning_rate=0.01, power=2.0)
    cycling = schedules.PolynomialDecay(0.1, 100, end_learning_rate=0.01, power=0.5, cycle=True)
    cosine = schedules.CosineDecay(0.1, 200, alpha=0.1)
    warm = schedules.CosineDecay(0.0, 200, warmup_target=0.2, warmup_steps=50)
    for step in steps:
        assert exponential(step) == pytest.approx(0.1 * 0.5 ** (step / 50), rel=1e-12)
        assert stair(step) == pytest.approx(0.1 * 0.5 ** (step // 50), rel=1e-12)
        assert inverse(step) == pytest.approx(0.1 / (1 + 0.5 * step / 20), rel=1e-12)
        assert inverse_stair(step) == pytest.approx(0.1 / (1 + 0.5 * (step // 20)), rel=1e-12)
        held = min(step, 100)
        assert polynomial(step) == pytest.approx(0.09 * (1 - held / 100) ** 2 + 0.01, rel=1e-12)
        cycle_steps = 100 * (1 if step == 0 else math.ceil(step / 100))
        assert cycling(step) == pytest.approx(0.09 * (1 - step / cycle_steps) ** 0.5 + 0.01, rel=1e-12)
        fraction = min(step, 200) / 200
        assert cosine(step) == pytest.approx(0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * fraction)) + 0.1), rel=1e-12)
        if step < 50:
            assert warm(step) == pytest.approx(0.2 * step / 50, rel=1e-12, abs=1e-15)
        else:
            fraction = min(step - 50, 200) / 200
            assert warm(step) == pytest.approx(0.2 * 0.5 * (1 + math.cos(math.pi * fraction)), rel=1e-12, abs=1e-15)
    assert warm(50) == pytest.approx(0.2) and warm(250) == pytest.approx(0.0, abs=1e-15)


def test_piecewise_constant_decay_takes_the_value_of_the_boundary_at_it():
    schedule = schedules.PiecewiseConstantDecay([10, 20], [1.0, 0.5, 0.1])
    for step, want in [(0, 1.0), (9, 1.0), (10, 1.0), (11, 0.5), (20, 0.5), (21, 0.1), (10_000, 0.1)]:
        assert schedule(step) == want, step


def test_schedules_round_trip_through_their_config_and_refuse_bad_arguments():
    made = [
        schedules.ExponentialDecay(0.1, 50, 0.5, staircase=True),
        schedules.PiecewiseConstantDecay([10, 20], [1.0, 0.5, 0.1]),
        schedules.CosineDecay(0.1, 200, alpha=0.1, warmup_target=0.3, warmup_steps=10),
        schedules.PolynomialDecay(0.1, 100, cycle=True),
        schedules.InverseTimeDecay(0.1, 20, 0.5),
    ]
    for schedule in made:
        again = type(schedule).from_config(schedule.get_config())
        assert again.get_config() == schedule.get_config()
        assert [again(step) for step in range(0, 300, 13)] == [schedule(step) for step in range(0, 300, 13)]
    assert made[2].get_config()["warmup_target"] == pytest.approx(0.3)
    for bad in (
        lambda: schedules.ExponentialDecay(0.1, 0, 0.5),
        lambda: schedules.InverseTimeDecay(0.1, -3, 0.5),
        lambda: schedules.PiecewiseConstantDecay([10, 20], [1.0, 0.5]),
        lambda: schedules.PiecewiseConstantDecay([20, 10], [1.0, 0.5, 0.1]),
        lambda: schedules.CosineDecay(float("nan"), 10),
        lambda: schedules.PolynomialDecay(0.1, 10)(-1),
    ):
        with pytest.raises(wg.InvalidArgumentError):
            bad()


@pytest.mark.parametrize("make", [wg.optim.SGD, wg.optim.RMSprop])
def test_an_optimizer_takes_its_rate_from_a_schedule_at_every_step(session, rng, make):
    schedule = schedules.PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.01])
    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, STEPS)
    optimizer = make(learning_rate=schedule)
    assert optimizer.learning_rate == pytest.approx(0.1)
    variables = [session.variable(start) for start in starts]
    name = "sgd" if make is wg.optim.SGD else "rmsprop"
    want = [f64(start) for start in starts]
    velocity = [np.zeros(start.shape) for start in starts]
    for step, grads in enumerate(gradients):
        assert optimizer.learning_rate == pytest.approx(schedule(step))
        optimizer.step(variables, [session.tensor(g) for g in grads])
        lr = float(np.float32(schedule(step)))
        for index, g in enumerate(grads):
            if name == "sgd":
                want[index] = want[index] - lr * f64(g)
            else:
                rho = float(np.float32(0.9))
                velocity[index] = rho * velocity[index] + (1 - rho) * f64(g) ** 2
                want[index] = want[index] - lr * f64(g) / np.sqrt(velocity[index] + float(np.float32(1e-7)))
    for variable, w in zip(variables, want, strict=True):
        np.testing.assert_allclose(variable.numpy(), w, rtol=1e-5, atol=1e-6)
    optimizer.learning_rate = 0.5
    assert optimizer.learning_rate == pytest.approx(0.5)


# --- checkpoints ---

SAVED = {
    "rmsprop centered with momentum": (
        lambda: wg.optim.RMSprop(0.01, momentum=0.5, centered=True),
        ("velocity", "momentum", "average_gradient"),
    ),
    "rmsprop": (lambda: wg.optim.RMSprop(0.01), ("velocity",)),
    "adagrad": (lambda: wg.optim.Adagrad(0.05, weight_decay=0.1), ("accumulator",)),
    "adamax": (lambda: wg.optim.Adamax(0.01), ("m", "u")),
    "nadam": (lambda: wg.optim.Nadam(0.01), ("m", "v")),
    "lion": (lambda: wg.optim.Lion(0.001), ("momentum",)),
    "adadelta": (lambda: wg.optim.Adadelta(1.0), ("accumulated_grad", "accumulated_delta_var")),
    "ftrl": (lambda: wg.optim.Ftrl(0.05, l1_regularization_strength=0.001), ("accumulator", "linear")),
    "sgd nesterov": (lambda: wg.optim.SGD(0.1, momentum=0.9, nesterov=True), ("momentum",)),
}


def test_every_rule_of_the_table_has_a_checkpoint_case():
    assert set(RULE_CLASSES) <= {case.split()[0] for case in SAVED}


def train_steps(session, model, optimizer, batches):
    for x, y in batches:
        with wg.GradientTape() as tape:
            loss = wg.softmax_cross_entropy(model(session.tensor(x)), session.tensor(y)).mean()
        params = model.parameters()
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params, strict=True))


@pytest.mark.parametrize("case", SAVED)
def test_the_state_round_trips_through_a_checkpoint_bit_for_bit(make_session, adapter, rng, tmp_path, case):
    import safetensors.numpy

    make, slots = SAVED[case]
    path = tmp_path / "model.safetensors"
    first, second = make_session(adapter), make_session(adapter)
    model = wg.nn.Mlp(first, [6, 9, 4], seed=int(rng.integers(2**32)))
    data = [
        (rng.uniform(-1, 1, (5, 6)).astype(np.float32), rng.uniform(0, 1, (5, 4)).astype(np.float32)) for _ in range(5)
    ]
    optimizer = make()
    train_steps(first, model, optimizer, data[:3])
    wg.save(path, model, optimizer)
    stored = safetensors.numpy.load_file(str(path))
    expected = {name for name, _ in model.named_parameters()}
    expected |= {f"optimizer.{slot}.{name}" for slot in slots for name, _ in model.named_parameters()}
    assert set(stored) == expected

    restored = make()
    loaded = wg.load(path, second, optimizer=restored)
    assert restored.iterations == 3
    train_steps(first, model, optimizer, data[3:])
    train_steps(second, loaded, restored, data[3:])
    for (name, a), (_, b) in zip(model.named_parameters(), loaded.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    # Into an optimizer of another kind, or RMSprop keeping other slots, the state is refused.
    with pytest.raises(wg.CheckpointError, match="resume with the same optimizer"):
        wg.load(path, second, optimizer=wg.optim.Adam() if "adam" not in case else wg.optim.Lion())
    if case.startswith("rmsprop"):
        with pytest.raises((wg.CheckpointError, wg.InvalidArgumentError)):
            wg.load(path, second, optimizer=wg.optim.RMSprop(momentum=0.9 if case == "rmsprop" else 0.0))


def test_a_schedule_that_reaches_zero_leaves_the_variables_and_advances_the_state(session, rng):
    """CosineDecay with alpha 0 ends at a rate of 0, which the optimizer takes as a step that moves nothing."""
    start = rng.uniform(-1, 1, (7,)).astype(np.float32)
    optimizer = wg.optim.Adagrad(learning_rate=schedules.CosineDecay(0.1, 2))
    variable = session.variable(start)
    for step in range(4):
        before = variable.numpy()
        optimizer.step([variable], [session.tensor(np.ones(7, np.float32))])
        if step >= 2:
            np.testing.assert_array_equal(variable.numpy(), before)
        else:
            assert not np.array_equal(variable.numpy(), before)
    assert optimizer.iterations == 4 and optimizer.learning_rate == 0.0
    assert repr(optimizer).startswith("Adagrad(learning_rate=")


def test_kerass_optimizer_functions_are_kerass_updates(session, rng):
    from wgcompute import keras

    starts = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in SHAPES]
    gradients = gradients_for(rng, STEPS)
    settings = {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-3}
    for make, decay in [(keras.optimizers.Adam, {"weight_decay": 0.1}), (keras.optimizers.AdamW, {})]:
        got = run(session, make(**settings, **decay), starts, gradients)
        want = reference("adam", {**settings, "weight_decay": decay.get("weight_decay", 0.004)}, starts, gradients)
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{make.__name__}, variable {index}")
    nesterov = {"learning_rate": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}
    got = run(session, keras.optimizers.SGD(**nesterov), starts, gradients)
    want = reference("sgd", nesterov, starts, gradients)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # compile's strings give Keras's defaults.
    from wgcompute._compile import _optimizer_of

    assert "weight_decay=0.004" in repr(_optimizer_of("adamw")) and "eps=1e-07" in repr(_optimizer_of("Adam"))
    for refused in ({"amsgrad": True}, {"use_ema": True}, {"gradient_accumulation_steps": 4}, {"betas": 0.9}):
        with pytest.raises(wg.InvalidArgumentError):
            keras.optimizers.Adam(**refused)
    keras.optimizers.Adam(name="adam", use_ema=False, ema_momentum=0.99)
