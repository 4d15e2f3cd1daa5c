"""HDP topic-model estimators: collapsed variational (CV-HDP), direct-assignment
Gibbs (G-HDP), truncation-free SVI and the online VB baseline."""
from bnpcore.models.hdp_svi import OnlineVB, TruncationFreeSVI  # noqa: F401
