"""Declaring a discrete Bayesian network with Dirichlet priors on its conditional
probability tables, and checking data against it.

A node has a name, a number of states, parents and a flag saying whether it is
observed. Its conditional probability table (CPT) has shape
``(*parent_states, n_states)``: one column (the last axis) per joint parent
state, each column a distribution over the node's states with its own
Dirichlet prior. Counts of a family use the same shape.
"""
import numbers

import numpy as np

from bnpcore._validation import check_dirichlet, check_int, check_random_state

__all__ = ["Node", "Network"]


class Node:
    """One discrete node of a :class:`Network`.

    Parameters
    ----------
    name : str
    n_states : int
        Number of states (>= 1).
    parents : sequence of str, default ()
        Names of the parent nodes; the CPT's axes follow this order.
    observed : bool, default False
        Observed nodes are the columns of the data; the others are hidden and
        integrated out.
    prior : float or array-like, default 1.0
        Dirichlet prior of every CPT column: a number (symmetric), an array of
        shape ``(n_states,)`` (the same for every column) or of shape
        ``(*parent_states, n_states)`` (one prior per column).
    """

    def __init__(self, name, n_states, parents=(), observed=False, prior=1.0):
        if not isinstance(name, str) or not name:
            raise TypeError(f"node names must be non-empty strings, got {name!r}")
        if isinstance(parents, str):
            parents = (parents,)
        self.name = name
        self.n_states = n_states
        self.parents = tuple(parents)
        self.observed = bool(observed)
        self.prior = prior

    def __repr__(self):
        kind = "observed" if self.observed else "hidden"
        return f"Node({self.name!r}, {self.n_states}, parents={self.parents!r}, {kind})"


class Network:
    """A discrete Bayesian network with Dirichlet priors on its CPTs (the model of
    Welling, Teh & Kappen 2008, section 6).

    Every problem with the declaration raises ``ValueError`` naming the node: a
    node with no states, an unknown or repeated parent, a cycle, a prior of the
    wrong shape or not positive.

    Parameters
    ----------
    nodes : sequence of Node
        In any order; ``observed`` lists the observed ones in this order, which
        is the column order of the data.

    Attributes
    ----------
    names : list of str
        Node names in declaration order.
    observed : list of str
        Names of the observed nodes (the data columns), in declaration order.
    hidden : list of str
    order : list of int
        A topological order (parents before children) of the node indices.

    Examples
    --------
    LDA as the network d -> z -> w:

    >>> from bnpcore.bayesnet import Network, Node
    >>> net = Network([Node("d", 100, observed=True), Node("z", 10, ["d"], prior=0.1),
    ...                Node("w", 500, ["z"], observed=True, prior=0.01)])
    >>> net.observed
    ['d', 'w']
    """

    def __init__(self, nodes):
        nodes = list(nodes)
        if not nodes:
            raise ValueError("a network needs at least one node")
        for node in nodes:
            if not isinstance(node, Node):
                raise TypeError(f"nodes must be Node instances, got {type(node).__name__}")
        self.nodes = nodes
        self.names = [node.name for node in nodes]
        self.index = {}
        for i, node in enumerate(nodes):
            if node.name in self.index:
                raise ValueError(f"node {node.name!r} is declared twice")
            self.index[node.name] = i
        self.states = np.array([self._check_states(node) for node in nodes], dtype=np.int64)
        self.parents = [self._check_parents(node) for node in nodes]
        self.order = self._topological_order()
        self.priors = [check_dirichlet(node.prior, self.table_shape(i), f"node {node.name!r}: prior")
                       for i, node in enumerate(self.nodes)]
        self.observed = [node.name for node in nodes if node.observed]
        self.hidden = [node.name for node in nodes if not node.observed]

    def __repr__(self):
        return f"Network({self.nodes!r})"

    # -- checks --------------------------------------------------------------
    @staticmethod
    def _check_states(node):
        n = node.n_states
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"node {node.name!r}: n_states must be an integer, got {type(n).__name__}")
        if n < 1:
            raise ValueError(f"node {node.name!r} has no states (n_states={n})")
        return int(n)

    def _check_parents(self, node):
        seen = []
        for p in node.parents:
            if p not in self.index:
                raise ValueError(f"node {node.name!r}: unknown parent {p!r}")
            if p == node.name:
                raise ValueError(f"node {node.name!r} is its own parent (a cycle)")
            if self.index[p] in seen:
                raise ValueError(f"node {node.name!r}: parent {p!r} listed twice")
            seen.append(self.index[p])
        return seen

    def _topological_order(self):
        """Kahn's algorithm; a node left over lies on (or below) a cycle."""
        n = len(self.nodes)
        n_parents = [len(p) for p in self.parents]
        children = [[] for _ in range(n)]
        for v, ps in enumerate(self.parents):
            for p in ps:
                children[p].append(v)
        ready = [v for v in range(n) if n_parents[v] == 0]
        order = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for c in children[v]:
                n_parents[c] -= 1
                if n_parents[c] == 0:
                    ready.append(c)
        if len(order) < n:
            left = set(range(n)) - set(order)
            # walk up parents inside the leftover set until a node repeats: it is on a cycle
            v, path = min(left), []
            while v not in path:
                path.append(v)
                v = next(p for p in self.parents[v] if p in left)
            cycle = path[path.index(v):]
            names = " -> ".join(self.names[u] for u in reversed(cycle + [v]))
            raise ValueError(f"the network has a cycle through node {self.names[v]!r}: {names}")
        return order

    def table_shape(self, i):
        """Shape ``(*parent_states, n_states)`` of node ``i``'s CPT and counts."""
        return tuple(int(self.states[p]) for p in self.parents[i]) + (int(self.states[i]),)

    # -- data ----------------------------------------------------------------
    def check_rows(self, data, columns=None):
        """Data rows as an int64 array of shape (n_rows, n_columns).

        ``data`` is an integer array whose columns are the nodes ``columns``
        (default: ``observed``), or a mapping from those names to 1-d arrays.
        A state outside ``[0, n_states)`` raises ``ValueError`` naming the node.
        """
        columns = self.observed if columns is None else list(columns)
        if isinstance(data, dict):
            missing = [c for c in columns if c not in data]
            extra = [k for k in data if k not in columns]
            if missing or extra:
                raise ValueError(f"data must have exactly the columns {columns}; missing {missing}, "
                                 f"unexpected {extra}")
            data = np.column_stack([np.asarray(data[c]).ravel() for c in columns])
        arr = np.asarray(data)
        if arr.ndim == 1 and len(columns) == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[1] != len(columns):
            raise ValueError(f"data must have shape (n_cases, {len(columns)}) with columns {columns}, "
                             f"got shape {arr.shape}")
        if arr.shape[0] == 0:
            raise ValueError("data has no cases")
        if arr.dtype.kind not in "iu" and (arr.dtype.kind != "f" or not np.all(arr == np.round(arr))):
            raise ValueError("data must hold integer states")
        arr = arr.astype(np.int64)
        for col, name in enumerate(columns):
            n = self.states[self.index[name]]
            bad = (arr[:, col] < 0) | (arr[:, col] >= n)
            if bad.any():
                row = int(np.argmax(bad))
                raise ValueError(f"node {name!r}: state {arr[row, col]} in row {row} is out of range "
                                 f"[0, {n})")
        return np.ascontiguousarray(arr)

    def check_data(self, data, counts=None):
        """Data as distinct rows (n_cases, n_observed) int64 and their counts
        (n_cases,) int64.

        ``data`` as for :meth:`check_rows`. ``counts`` (positive integers)
        gives how many data cases each row stands for; then the rows must be
        distinct and keep their order (the sweep order). Without ``counts``,
        every row is one case and repeated rows are merged (rows then sorted).
        """
        arr = self.check_rows(data)
        if counts is None:
            arr, counts = np.unique(arr, axis=0, return_counts=True)
        else:
            counts = np.asarray(counts)
            if counts.shape != (arr.shape[0],):
                raise ValueError(f"counts must have shape ({arr.shape[0]},), got {counts.shape}")
            if counts.dtype.kind not in "iu" or counts.min() < 1:
                raise ValueError("counts must be positive integers")
            if len(np.unique(arr, axis=0)) != len(arr):
                raise ValueError("rows of data must be distinct configurations when counts are given "
                                 "(merge repeated rows and add their counts)")
        return np.ascontiguousarray(arr), np.ascontiguousarray(counts, dtype=np.int64)

    # -- synthetic data -----------------------------------------------------------
    def sample(self, n_cases, random_state=None, cpts=None):
        """Forward (ancestral) samples of all nodes.

        Parameters
        ----------
        n_cases : int
        random_state : int, Generator or None
        cpts : dict, optional
            Node name -> CPT of shape ``(*parent_states, n_states)``; by default
            every column is drawn from its Dirichlet prior (first, node by node
            in declaration order).

        Returns
        -------
        states : ndarray of shape (n_cases, n_nodes)
            Columns in declaration order (``states[:, [net.index[o] for o in
            net.observed]]`` are the observed columns).
        cpts : dict
        """
        n_cases = check_int(n_cases, "n_cases")
        rng = check_random_state(random_state)
        if cpts is None:
            cpts = {}
            for v, node in enumerate(self.nodes):
                prior = self.priors[v].reshape(-1, self.states[v])
                cpts[node.name] = np.stack([rng.dirichlet(a) for a in prior]).reshape(self.table_shape(v))
        states = np.zeros((n_cases, len(self.nodes)), dtype=np.int64)
        for v in self.order:
            table = np.asarray(cpts[self.names[v]], dtype=np.float64)
            if table.shape != self.table_shape(v):
                raise ValueError(f"node {self.names[v]!r}: CPT must have shape {self.table_shape(v)}, "
                                 f"got {table.shape}")
            cols = np.broadcast_to(table[tuple(states[:, p] for p in self.parents[v])],
                                   (n_cases, int(self.states[v])))
            cum = np.cumsum(cols, axis=1)
            u = rng.random(n_cases) * cum[:, -1]
            states[:, v] = np.minimum((cum <= u[:, None]).sum(axis=1), self.states[v] - 1)
        return states, cpts
