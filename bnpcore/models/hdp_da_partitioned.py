"""``hdp.DirectAssignmentVB``'s iteration on partitions of the documents (the
state protocol of :mod:`bnpcore.inference.batch`; ``bnpcore.distributed`` runs it).

The partitions hold only the documents. Per iteration the state takes the
documents (the next minibatch, or all of them) as the local fit does and reads
them itself (the moves need them), sends E[log phi] of their words (their
vocabulary x K doubles) once, and every partition holding some of them runs
the E-step kernel to convergence on its share with one thread (batch: from the
share's theta rows of the previous iteration) and returns its rows of theta,
n_jk and psi(theta') and its pairs' responsibilities and log normalisers. The
state puts them in the drawn order, redoes the kernel's sums (statistics,
entropy) in the kernel's order (``reduce_estep``: one pass over the pairs,
against the E-step's many) and runs the rest of the iteration (merges, global
step, splits, hyperparameters, pruning: ``DAState.update``). Every document's
E-step is the local one's and the sums are added in the same order, so the fit
equals the local one bit for bit, for any number of partitions. The E-step's
rounds run on the partitions, everything else here, which holds what the local
fit holds: the iteration's documents (batch: the corpus), theta (batch: D x
(K + 1) doubles) and the responsibilities of the iteration's pairs (x K
doubles; batch: every pair's).
"""
import time

import numpy as np

from bnpcore.inference.online import Minibatch

__all__ = ["PartitionedDA"]


class PartitionedDA:
    """The local step and the iteration of ``DAState`` on partitions (the module docstring)."""

    @staticmethod
    def local_step(part, elogphi, vocab, alpha_beta, settings, n_words, rows, theta):
        """``estep_documents`` on the documents ``rows`` of a partition (None:
        all of them), with the rows of ``elogphi`` (over the minibatch
        vocabulary ``vocab``) of their words and their warm-start ``theta``
        (copied: a recomputed task starts from the same numbers): (the
        partition, (theta, ndk, psi(theta'), responsibilities, log normalisers))."""
        from bnpcore.models.hdp_da import estep_documents
        rows = np.arange(len(part["indptr"]) - 1) if rows is None else rows
        share = Minibatch.from_arrays(part["indptr"], part["indices"], part["counts"], rows,
                                      np.full(n_words, -1, dtype=np.int32))
        where = np.full(n_words, -1, dtype=np.int64)
        where[vocab] = np.arange(len(vocab))
        theta, ndk, _, _, resp, log_norm, psi_theta = estep_documents(
            share, elogphi[where[share.vocab]], alpha_beta, settings, None if theta is None else theta.copy(),
            norms=True)
        return part, (theta, ndk, psi_theta, resp, log_norm)

    def iterate(self, parts, sampling=False):
        """``DAState.step`` with the E-step of each partition's share of the
        iteration's documents on ``parts``; the moves and the global step here
        (``update``)."""
        from bnpcore.models.hdp_da import _Minibatch, reduce_estep
        batch = Minibatch(self.corpus, self.next_ids(), self._word_map)
        b, ids = parts.bounds, batch.doc_ids
        # the minibatch's documents by partition; each share's positions in the drawn order
        part = np.searchsorted(b, ids, side="right") - 1
        by_part = np.argsort(part, kind="stable")
        shares = [(p, pos) for p, pos in enumerate(np.split(by_part, np.cumsum(np.bincount(part))[:-1])) if len(pos)]
        elogphi = self.elogphi(batch.vocab)
        settings, batch_mode = dict(self.settings, n_threads=1), self.settings["mode"] == "batch"
        each = {p: (None if batch_mode else ids[pos] - b[p], self.theta[ids[pos]] if self.warm else None)
                for p, pos in shares}
        outs = parts.map(PartitionedDA.local_step, elogphi, batch.vocab, self.alpha * self.beta, settings,
                         self.corpus.n_words, each=each, updates=False)
        # the local E-step's outputs, rows and pairs in the drawn order, and its sums in the kernel's order
        S, K = batch.n_docs, self.n_components
        theta, ndk, psi_theta = np.empty((S, K + 1)), np.empty((S, K)), np.empty((S, K))
        resp, log_norm = np.empty((len(batch.words), K)), np.empty(len(batch.words))
        for (_, pos), share in zip(shares, outs):
            pairs = _pairs_of(batch.ptr, pos)
            theta[pos], ndk[pos], psi_theta[pos], resp[pairs], log_norm[pairs] = share
        stats, entropy = reduce_estep(batch, elogphi, ndk, resp, log_norm, psi_theta)
        local = _Minibatch(batch, theta, ndk, stats, entropy, resp if settings["split_merge"] else None)
        tick = time.perf_counter()
        record = self.update(local)        # serial in the local fit too: moves, global step, hyperparameters
        record["client_seconds"] = time.perf_counter() - tick
        return record


def _pairs_of(ptr, pos):
    """Positions, in a minibatch's CSR pairs (``ptr``), of the pairs of its documents ``pos``, in that order."""
    lengths = ptr[pos + 1] - ptr[pos]
    return np.repeat(ptr[pos] - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
