"""Drivers: the outer loops (batch sweeps, online minibatches, EP passes)."""
