"""A small reverse-mode evaluation graph in float64 NumPy, for `nnpops analyze`.

The models are written once, forward, with the operations below; every operation records the
adjoint (vector-Jacobian product) written by hand next to it, and ``Graph.gradient`` runs them
in reverse creation order.  A *stage* is a named point of the forward pass
(``Graph.stage(name, value)``): the graph records the statistics of the values passing through it
forward and of their adjoints backward, and, when asked to round that stage, rounds both (the
forward output and the adjoint arriving at it) to the chosen format, everything else staying
float64.  This is outside the library: the product kernels have no such switch.
"""

import numpy as np

from .analyze_round import RangeStats, round_to

__all__ = ["Graph", "Var"]


def _unbroadcast(g, shape):
    """Sum the adjoint ``g`` over the axes that broadcasting added or stretched to reach
    ``shape``."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for ax, n in enumerate(shape):
        if n == 1 and g.shape[ax] != 1:
            g = g.sum(axis=ax, keepdims=True)
    return g


class Var:
    """A value of the graph: ``value`` (a float64 array) and the links to its inputs."""

    __slots__ = ("graph", "value", "parents", "index", "hook")
    __array_ufunc__ = None  # ndarray (op) Var defers to Var's reflected operators

    def __init__(self, graph, value, parents=()):
        self.graph = graph
        self.value = value
        self.parents = parents  # ((Var, adjoint function), ...)
        self.hook = None
        self.index = len(graph.nodes)
        graph.nodes.append(self)

    @property
    def shape(self):
        return self.value.shape

    def __add__(self, o):
        return add(self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return add(self, neg(o) if isinstance(o, Var) else -np.asarray(o, dtype=np.float64))

    def __rsub__(self, o):
        return add(neg(self), o)

    def __mul__(self, o):
        return mul(self, o)

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, Var):
            return mul(self, reciprocal(o))
        return mul(self, 1.0 / np.asarray(o, dtype=np.float64))

    def __rtruediv__(self, o):
        return mul(reciprocal(self), o)

    def __neg__(self):
        return neg(self)

    def __getitem__(self, key):
        return getitem(self, key)


class Graph:
    """One evaluation.  ``stats``: a dict to fill with :class:`RangeStats` per stage (forward
    under ``(name, "forward")``, adjoints under ``(name, "adjoint")``), or None; ``rounded``:
    ``(stage name, format)`` to round at that stage, or None.  ``seen`` lists the stage names in
    the order they were first passed."""

    def __init__(self, stats=None, rounded=None):
        self.nodes = []
        self.stats = stats
        self.rounded = rounded
        self.seen = []

    def input(self, value):
        return Var(self, np.asarray(value, dtype=np.float64))

    def stage(self, name, v):
        if name not in self.seen:
            self.seen.append(name)
        if self.stats is not None:
            self.stats.setdefault((name, "forward"), RangeStats()).add(v.value)
        active = self.rounded is not None and self.rounded[0] == name
        fmt = self.rounded[1] if active else None
        value = round_to(v.value, fmt) if active else v.value
        out = Var(self, value, ((v, lambda g: g),))
        stats = self.stats

        def hook(g):
            if stats is not None:
                stats.setdefault((name, "adjoint"), RangeStats()).add(g)
            return round_to(g, fmt) if active else g

        out.hook = hook
        return out

    def release(self):
        """Drop the recorded values (the graph and its values reference each other; without
        this a finished evaluation waits for the cycle collector, holding its memory)."""
        for node in self.nodes:
            node.parents = ()
            node.hook = None
        self.nodes = []

    def gradient(self, out, wrt):
        """d out / d wrt (out: a scalar Var)."""
        grads = {out.index: np.ones_like(out.value)}
        result = None
        for node in reversed(self.nodes[:out.index + 1]):
            g = grads.pop(node.index, None)
            if g is None:
                continue
            if node.hook is not None:
                g = node.hook(g)
            if node is wrt:
                result = g
            for parent, adjoint in node.parents:
                c = adjoint(g)
                prev = grads.get(parent.index)
                grads[parent.index] = c if prev is None else prev + c
        if result is None:
            result = np.zeros_like(wrt.value)
        return result


def _const(x):
    return np.asarray(x, dtype=np.float64)


def _graph_of(*xs):
    for x in xs:
        if isinstance(x, Var):
            return x.graph
    raise TypeError("no graph value among the operands")


def add(a, b):
    if not isinstance(b, Var):
        if not isinstance(a, Var):
            return _const(a) + _const(b)
        a, b = a, _const(b)
        return Var(a.graph, a.value + b, ((a, lambda g, s=a.shape: _unbroadcast(g, s)),))
    if not isinstance(a, Var):
        return add(b, a)
    return Var(a.graph, a.value + b.value,
               ((a, lambda g, s=a.shape: _unbroadcast(g, s)),
                (b, lambda g, s=b.shape: _unbroadcast(g, s))))


def neg(a):
    return Var(a.graph, -a.value, ((a, lambda g: -g),))


def mul(a, b):
    if not isinstance(a, Var):
        a, b = b, a
    if not isinstance(b, Var):
        c = _const(b)
        return Var(a.graph, a.value * c, ((a, lambda g, s=a.shape: _unbroadcast(g * c, s)),))
    av, bv = a.value, b.value
    return Var(a.graph, av * bv,
               ((a, lambda g, s=a.shape: _unbroadcast(g * bv, s)),
                (b, lambda g, s=b.shape: _unbroadcast(g * av, s))))


def reciprocal(a):
    y = 1.0 / a.value
    return Var(a.graph, y, ((a, lambda g: -g * y * y),))


def exp(a):
    y = np.exp(a.value)
    return Var(a.graph, y, ((a, lambda g: g * y),))


def cos(a):
    x = a.value
    return Var(a.graph, np.cos(x), ((a, lambda g: -g * np.sin(x)),))


def sqrt(a):
    y = np.sqrt(a.value)
    return Var(a.graph, y, ((a, lambda g: g * 0.5 / y),))


def acos(a):
    x = a.value
    return Var(a.graph, np.arccos(x), ((a, lambda g: -g / np.sqrt(1.0 - x * x)),))


def power(a, p):
    """a ** p for a >= 0 and a constant p (broadcast); the adjoint is p a^(p-1), written as
    p a^p / a where a > 0 and 0 at a = 0 (p > 1 here)."""
    x = a.value
    p = _const(p)
    y = x ** p

    def adj(g):
        d = np.where(x > 0.0, p * y / np.where(x > 0.0, x, 1.0), 0.0)
        return _unbroadcast(g * d, x.shape)

    return Var(a.graph, y, ((a, adj),))


def tanh(a):
    y = np.tanh(a.value)
    return Var(a.graph, y, ((a, lambda g: g * (1.0 - y * y)),))


def sigmoid(a):
    y = 1.0 / (1.0 + np.exp(-a.value))
    return Var(a.graph, y, ((a, lambda g: g * y * (1.0 - y)),))


def softplus(a):
    x = a.value
    return Var(a.graph, np.logaddexp(0.0, x), ((a, lambda g: g / (1.0 + np.exp(-x))),))


def celu(a, alpha):
    x = a.value
    neg_part = alpha * np.expm1(np.minimum(x, 0.0) / alpha)
    y = np.where(x > 0.0, x, neg_part)
    d = np.where(x > 0.0, 1.0, np.exp(np.minimum(x, 0.0) / alpha))
    return Var(a.graph, y, ((a, lambda g: g * d),))


def linear(x, wt, b=None):
    """x @ wt (+ b): ``wt`` a constant [..., in, out] (stacked matrices broadcast like matmul),
    ``b`` a constant or None."""
    y = np.matmul(x.value, wt)
    if b is not None:
        y = y + b
    wtt = np.swapaxes(wt, -1, -2)
    return Var(x.graph, y, ((x, lambda g, s=x.shape: _unbroadcast(np.matmul(g, wtt), s)),))


def segment_sum(values, idx, n):
    """Rows of ``values`` summed into ``n`` rows at ``idx``: each row's terms are added in the
    order they appear (a stable sort, then one sequential reduction per row)."""
    out = np.zeros((n,) + values.shape[1:])
    if len(idx) == 0:
        return out
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sidx[1:] != sidx[:-1])))
    out[sidx[starts]] = np.add.reduceat(values[order], starts, axis=0)
    return out


def gather(a, idx):
    """a[idx] along the first axis."""
    n = a.shape[0]
    return Var(a.graph, a.value[idx], ((a, lambda g: segment_sum(g, idx, n)),))


def scatter(a, idx, n):
    """Rows of ``a`` summed into ``n`` rows at ``idx`` (in the order of ``a``'s rows)."""
    return Var(a.graph, segment_sum(a.value, idx, n), ((a, lambda g: g[idx]),))


def reshape(a, shape):
    s = a.shape
    return Var(a.graph, a.value.reshape(shape), ((a, lambda g: g.reshape(s)),))


def transpose(a, axes):
    inv = np.argsort(axes)
    return Var(a.graph, np.transpose(a.value, axes), ((a, lambda g: np.transpose(g, inv)),))


def concat(xs, axis):
    ax = axis % xs[0].value.ndim
    sizes = [x.shape[ax] for x in xs]
    edges = np.cumsum([0] + sizes)
    parents = []
    for k, x in enumerate(xs):
        sl = [slice(None)] * x.value.ndim
        sl[ax] = slice(int(edges[k]), int(edges[k + 1]))
        parents.append((x, lambda g, sl=tuple(sl): g[sl]))
    return Var(xs[0].graph, np.concatenate([x.value for x in xs], axis=ax), tuple(parents))


def total(a, axis=None, keepdims=False):
    s = a.shape

    def adj(g):
        if axis is not None and not keepdims:
            g = np.expand_dims(g, axis)
        return np.broadcast_to(g, s).copy()

    return Var(a.graph, np.sum(a.value, axis=axis, keepdims=keepdims), ((a, adj),))


def getitem(a, key):
    s = a.shape

    def adj(g):
        out = np.zeros(s)
        out[key] += g
        return out

    return Var(a.graph, a.value[key], ((a, adj),))


def einsum(spec, a, b):
    """A two-operand einsum of graph values, e.g. "nikf,nkjf->nijf"; every index of an operand
    appears in the output or in the other operand."""
    ins, out = spec.split("->")
    sa, sb = ins.split(",")
    av, bv = a.value, b.value
    return Var(a.graph, np.einsum(spec, av, bv),
               ((a, lambda g: np.einsum("%s,%s->%s" % (out, sb, sa), g, bv)),
                (b, lambda g: np.einsum("%s,%s->%s" % (out, sa, sb), g, av))))
