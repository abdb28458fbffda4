"""Scale-out: encoding sharded collections on Ray clusters."""
