"""Pure, testable pieces shared by the trainers in ``scripts/``.

gae            generalized advantage estimation (CleanRL's done convention, next-step autoreset)
ppo            the clipped PPO loss and its diagnostics; CleanRL's epoch/minibatch update; explained variance
distributions  categorical sampling / log-prob / entropy as plain tensor ops
normalize      RunningMeanStd, observation normalizer, reward scaler (gymnasium semantics, any device)
profiling      SectionTimer: env / inference / train / other per iteration and a summary table
checkpoint     atomic checkpoints every trainer writes alike (scripts/evaluate.py reads them)
config         --config preset.toml as tyro defaults, the command line wins; --resume
runlog         run dir name, tensorboard scalars, episode stats, SPS and the progress line
"""
