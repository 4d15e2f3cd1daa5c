"""Junction tree of the hidden part of a network, and its compilation into the
flat index tables of the message-passing kernels (``bnpcore.kernels._bayesnet``).

Observed nodes are clamped to each data case's values, so only hidden nodes
appear in the tree: two hidden nodes are joined when they share a family
(moralisation of the network restricted to the hidden nodes), the graph is
triangulated by greedy min-fill elimination (ties: fewer neighbours, then
declaration order), the maximal elimination cliques are joined by a maximum
spanning tree on separator sizes (which has the running intersection
property), and components are linked through empty separators so that there
is one root. This runs once per fit; it is not a hot path.
"""
import numpy as np

__all__ = ["triangulate", "clique_tree", "Plan"]


def moral_graph(network, hidden):
    """Adjacency (dict of sets) of the hidden nodes ``hidden`` (node indices):
    hidden members of one family are pairwise adjacent."""
    adj = {v: set() for v in hidden}
    for v in range(len(network.nodes)):
        members = [u for u in network.parents[v] + [v] if u in adj]
        for a in members:
            adj[a].update(u for u in members if u != a)
    return adj


def triangulate(adj):
    """Greedy min-fill elimination of the graph ``adj``; returns the maximal
    cliques of the triangulated graph (sorted tuples), in elimination order."""
    adj = {v: set(n) for v, n in adj.items()}

    def fill(v):
        """Edges that eliminating v adds between its neighbours."""
        nb = list(adj[v])
        return sum(1 for i, a in enumerate(nb) for b in nb[i + 1:] if b not in adj[a])

    cliques = []
    while adj:
        v = min(adj, key=lambda u: (fill(u), len(adj[u]), u))
        clique = tuple(sorted(adj[v] | {v}))
        if not any(set(clique) <= set(c) for c in cliques):
            cliques.append(clique)
        for a in adj[v]:
            adj[a] |= adj[v] - {a}
            adj[a].discard(v)
        del adj[v]
    return cliques


def clique_tree(cliques):
    """Maximum spanning tree (Prim) on separator sizes over ``cliques``; empty
    separators join disconnected components. Returns ``(order, parent)``: clique
    indices root first, each after its parent, and ``parent[c]`` (-1 for the root)."""
    n = len(cliques)
    if n == 0:
        return [], []
    sets = [set(c) for c in cliques]
    parent = [-1] * n
    best = [(-1, -1)] * n         # (separator size, tree neighbour) for cliques not in the tree
    order = [0]
    for c in range(1, n):
        best[c] = (len(sets[0] & sets[c]), 0)
    left = set(range(1, n))
    while left:
        c = max(left, key=lambda u: (best[u][0], -u))
        parent[c] = best[c][1]
        order.append(c)
        left.remove(c)
        for u in left:
            size = len(sets[c] & sets[u])
            if size > best[u][0]:
                best[u] = (size, c)
    return order, parent


def _assignments(states):
    """All joint states of variables with ``states`` (row-major), shape (prod, len)."""
    if len(states) == 0:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*[np.arange(k) for k in states], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


class Plan:
    """The junction tree of a network with ``observed`` clamped, compiled into
    the index tables of the kernels.

    Families (one per node, in declaration order) share one flat count layout:
    family v occupies ``count_off[v] : count_off[v] + size`` with its table
    shape ``(*parent_states, n_states)`` in C order, and its columns (joint
    parent states) ``col_off[v] : col_off[v] + size / n_states``.

    Families with a hidden member are *assigned* to the first clique (root
    first) holding their hidden members. Family ``a`` has ``S_a`` joint states
    of its hidden members (its *scope*, row-major in member order): scope state
    ``j`` is the entry ``base[case, a] + offtab[soff[a] + j]`` and the column
    ``colbase[case, a] + coltab[soff[a] + j]``, where ``base`` and ``colbase``
    carry the observed members' part, and clique state ``i`` of its clique
    falls in scope state ``scope[aoff[a] + i]``. Families of observed nodes
    only are constant for every case (``constant``).

    Parameters
    ----------
    network : Network
    observed : sequence of str
        The clamped nodes (the data columns, in this order).
    prune_barren : bool, default False
        Drop hidden nodes with no observed descendant. Valid only for
        normalised CPTs (scoring), whose barren parts sum to one.
    """

    def __init__(self, network, observed, prune_barren=False):
        self.network = net = network
        self.columns = list(observed)
        obs = [net.index[name] for name in self.columns]
        self.obs_col = {v: i for i, v in enumerate(obs)}
        keep = set(range(len(net.nodes)))
        if prune_barren:
            keep = self._ancestral(set(obs))
        self.nodes = sorted(keep)          # the families this plan scores
        hidden = [v for v in self.nodes if v not in self.obs_col]
        self.hidden = hidden
        self.cliques = triangulate(moral_graph(net, hidden))
        order, parent = clique_tree(self.cliques)
        self.cliques = [self.cliques[c] for c in order]
        pos = {c: i for i, c in enumerate(order)}
        self.parent = np.array([pos[parent[c]] if parent[c] >= 0 else -1 for c in order], dtype=np.int64)
        self._layout()
        self._compile()

    def _ancestral(self, observed):
        """Observed nodes and their ancestors: every other node is barren."""
        keep, stack = set(), list(observed)
        while stack:
            v = stack.pop()
            if v not in keep:
                keep.add(v)
                stack.extend(self.network.parents[v])
        return keep

    def _layout(self):
        net = self.network
        sizes = [int(np.prod(net.table_shape(v))) for v in range(len(net.nodes))]
        self.count_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        cols = [s // int(net.states[v]) for v, s in enumerate(sizes)]
        self.col_off = np.concatenate([[0], np.cumsum(cols)]).astype(np.int64)
        self.n_entries, self.n_columns = int(self.count_off[-1]), int(self.col_off[-1])

    def family_strides(self, v):
        """Strides of the members (parents..., v) in family v's flat table."""
        shape = self.network.table_shape(v)
        return np.array([int(np.prod(shape[i + 1:])) for i in range(len(shape))], dtype=np.int64)

    def _compile(self):
        net = self.network
        C = len(self.cliques)
        self.clique_states = [net.states[list(c)] for c in self.cliques]
        self.clique_size = np.array([int(np.prod(s)) for s in self.clique_states], dtype=np.int64)
        self.clique_off = np.concatenate([[0], np.cumsum(self.clique_size)]).astype(np.int64)
        tables = [_assignments(s) for s in self.clique_states]     # clique assignment -> states
        self.clique_tables = tables
        # separators: maps from child and parent clique assignments to separator assignments
        cmap, pmap, pm_off, sep_size = [], [], [0], []
        for c in range(C):
            p = self.parent[c]
            sep = [v for v in self.cliques[c] if p >= 0 and v in self.cliques[p]]
            sstates = net.states[sep] if sep else np.zeros(0, dtype=np.int64)
            sstride = np.array([int(np.prod(sstates[i + 1:])) for i in range(len(sep))], dtype=np.int64)
            cidx = [self.cliques[c].index(v) for v in sep]
            cmap.append(tables[c][:, cidx] @ sstride if sep else np.zeros(self.clique_size[c], dtype=np.int64))
            if p >= 0:
                pidx = [self.cliques[p].index(v) for v in sep]
                pmap.append(tables[p][:, pidx] @ sstride if sep else np.zeros(self.clique_size[p], dtype=np.int64))
                pm_off.append(pm_off[-1] + self.clique_size[p])
            else:
                pm_off.append(pm_off[-1])
            sep_size.append(int(np.prod(sstates)) if sep else 1)
        self.sep_size = np.array(sep_size, dtype=np.int64)
        self.sep_off = np.concatenate([[0], np.cumsum(self.sep_size)]).astype(np.int64)
        # assigned families
        self.assigned, self.constant = [], []
        offtab, coltab, scope, soff, aoff, aclique = [], [], [], [0], [0], []
        self.obs_strides, self.obs_colstrides = [], []
        for v in self.nodes:
            members = net.parents[v] + [v]
            strides = self.family_strides(v)
            colstrides = strides // int(net.states[v])      # parents' strides in the column index
            colstrides[-1] = 0
            hid = [i for i, u in enumerate(members) if u not in self.obs_col]
            self.obs_strides.append([(self.obs_col[u], strides[i]) for i, u in enumerate(members)
                                     if u in self.obs_col])
            self.obs_colstrides.append([(self.obs_col[u], colstrides[i]) for i, u in enumerate(members)
                                        if u in self.obs_col])
            if not hid:
                self.constant.append(v)
                continue
            c = next(c for c in range(C) if all(members[i] in self.cliques[c] for i in hid))
            idx = [self.cliques[c].index(members[i]) for i in hid]
            hstates = net.states[[members[i] for i in hid]]
            hstrides = np.array([int(np.prod(hstates[i + 1:])) for i in range(len(hid))], dtype=np.int64)
            joint = _assignments(hstates)
            offtab.append(joint @ strides[hid])
            coltab.append(joint @ colstrides[hid])
            scope.append(tables[c][:, idx] @ hstrides)
            soff.append(soff[-1] + len(joint))
            aoff.append(aoff[-1] + self.clique_size[c])
            aclique.append(c)
            self.assigned.append(v)
        # the kernels take pointers to element 0: keep every array non-empty
        def arr(x):
            x = np.concatenate(x) if x and isinstance(x[0], np.ndarray) else np.asarray(x)
            x = np.ascontiguousarray(x, dtype=np.int64)
            return x if x.size else np.zeros(1, dtype=np.int64)
        self.tables = {
            "clique_size": arr(list(self.clique_size)), "clique_off": arr(list(self.clique_off)),
            "parent": arr(list(self.parent)), "sep_size": arr(list(self.sep_size)), "sep_off": arr(list(self.sep_off)),
            "cmap": arr(cmap), "pmap": arr(pmap), "pmap_off": arr(pm_off),
            "aclique": arr(aclique), "aoff": arr(aoff), "soff": arr(soff), "scope": arr(scope),
            "offtab": arr(offtab), "coltab": arr(coltab),
            "n_cliques": C, "n_assigned": len(self.assigned),
        }
        self.n_cliques, self.n_assigned = C, len(self.assigned)

    # -- per data -----------------------------------------------------------
    def _base(self, data, which, columns):
        """Entry (or, with ``columns``, column) offsets of families ``which`` from
        their observed members, shape (n_cases, len(which))."""
        off, member_strides = (self.col_off, self.obs_colstrides) if columns else (self.count_off, self.obs_strides)
        pos = {v: i for i, v in enumerate(self.nodes)}
        out = np.empty((data.shape[0], len(which)), dtype=np.int64)
        for a, v in enumerate(which):
            out[:, a] = off[v] + sum((data[:, col] * s for col, s in member_strides[pos[v]]),
                                     np.zeros(len(data), np.int64))
        return out

    def bases(self, data):
        """(base, colbase) of shape (n_cases, n_assigned): the observed members'
        part of each assigned family's entry and column, per case."""
        return (np.ascontiguousarray(self._base(data, self.assigned, False)),
                np.ascontiguousarray(self._base(data, self.assigned, True)))

    def constant_entries(self, data):
        """(entries, columns) of shape (n_cases, n_constant) of the all-observed families."""
        return self._base(data, self.constant, False), self._base(data, self.constant, True)

    def encode(self, values):
        """Clique assignments (n, n_cliques) int32 from hidden node states
        ``values`` (n, len(hidden)) in the order of ``hidden``."""
        col = {v: i for i, v in enumerate(self.hidden)}
        out = np.empty((values.shape[0], max(self.n_cliques, 1)), dtype=np.int32)
        for c, clique in enumerate(self.cliques):
            strides = [int(np.prod(self.clique_states[c][i + 1:])) for i in range(len(clique))]
            out[:, c] = sum(values[:, col[v]] * s for v, s in zip(clique, strides))
        return out

    def decode(self, assign):
        """Hidden node states (n, len(hidden)) from clique assignments."""
        out = np.empty((assign.shape[0], len(self.hidden)), dtype=np.int64)
        for i, v in enumerate(self.hidden):
            c = next(c for c, clique in enumerate(self.cliques) if v in clique)
            out[:, i] = self.clique_tables[c][assign[:, c], self.cliques[c].index(v)]
        return out

    def scratch(self):
        """Work arrays of one message-passing call."""
        return {"belief": np.zeros(max(int(self.clique_off[-1]), 1)),
                "lp": np.zeros(max(int(self.tables["soff"][-1]), 1)),
                "marg": np.zeros(2 * max(int(np.diff(self.tables["soff"]).max(initial=1)), 1)),
                "msg": np.zeros(max(int(self.sep_off[-1]), 1)),
                "work": np.zeros(max(int(self.clique_size.max(initial=1)), int(self.sep_size.max(initial=1)))),
                "assign": np.zeros(max(self.n_cliques, 1), dtype=np.int64)}
