"""HDP topic-model estimators: collapsed variational (CV-HDP), direct-assignment
Gibbs (G-HDP), the data-parallel partially collapsed Gibbs sampler (PC-HDP),
truncation-free SVI, direct-assignment variational inference with
split-merge moves, and the online VB baseline."""
from bnpcore.models.hdp_collapsed import CollapsedVB
from bnpcore.models.hdp_da import DirectAssignmentVB
from bnpcore.models.hdp_gibbs import DirectAssignmentGibbs
from bnpcore.models.hdp_pc import PartiallyCollapsedGibbs
from bnpcore.models.hdp_svi import OnlineVB, TruncationFreeSVI

__all__ = ["CollapsedVB", "DirectAssignmentGibbs", "DirectAssignmentVB", "TruncationFreeSVI", "OnlineVB",
           "PartiallyCollapsedGibbs"]
