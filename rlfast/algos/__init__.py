"""Pure, testable pieces of the trainers (advantages, losses, profiling)."""
