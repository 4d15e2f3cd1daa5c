"""Data sets: the bundled KOS corpus and the synthetic data of the papers.

* :func:`load_kos` — the UCI KOS blog corpus (CC BY 4.0), shipped with the package.
* :func:`make_bars` — bars data of [NRM] (8 x 8 mixture) and [SM] (10 x 10 LDA).
* :func:`make_pitman_yor_mixture` — the power-law mixture of [NRM] section 4.2.
* :func:`write_synthetic` — an HDP or LDA corpus of any size, written to disk in bounded memory.

The generators are seeded by ``random_state`` and return a :class:`SyntheticData`
holding the corpus and the true parameters. Where a paper leaves a setting
unstated, the generator's docstring names the value bnpcore chose.
"""
from bnpcore.datasets._bundled import load_kos
from bnpcore.datasets._synthetic import SyntheticData, make_bars, make_pitman_yor_mixture, write_synthetic

__all__ = ["load_kos", "make_bars", "make_pitman_yor_mixture", "write_synthetic", "SyntheticData"]
