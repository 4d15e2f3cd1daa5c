"""HDP topic-model estimators: collapsed variational (CV-HDP), direct-assignment
Gibbs (G-HDP), truncation-free SVI and the online VB baseline."""
