"""What the trainers in ``scripts/`` share: the run layer and pure, testable pieces.

runargs        RunArgs: the flags every trainer has, and the checks that stop a bad run before it starts
signals        Ctrl-C and SIGTERM as KeyboardInterrupt between catch() and restore(), for the checkpoint-and-exit
run            the run layer: Run (seeding, device, pools, run dir, tensorboard, checkpoints, --resume, Ctrl-C
               via signals.Interrupts, profile table)
flags          flag dataclasses with declared ranges (Flags, bounded), checked once by validate()
config         --config preset.toml as tyro defaults, the command line wins; --resume
checkpoint     atomic, checksummed checkpoints every trainer writes alike; which script goes on with one
contract       what a trainer script owes evaluate.py (TrainerScript, Policy)
runlog         run dir name, tensorboard scalars, episode stats, SPS and the progress line
profiling      SectionTimer: env / inference / train / other per iteration and a summary table
ppo            PPOArgs, Rollout storage, the clipped PPO loss, learning-rate schedules (the update: in each script)
appo           APPOArgs, the APPO loss (V-trace targets, PPO's clip); the update: in scripts/appo.py
vtrace         V-trace targets and advantages (Espeholt et al. 2018), pure tensor ops
appo_sampler   APPO's sampling side: the sampler thread, the weights it acts with (PublishedWeights)
appo_trajectories  APPO's trajectories: the storage the sampler fills and a learner batch holds
distributed    torchrun data parallelism: the world, env shards, all-reduce of gradients, checks in sync
dqn            DQNArgs, the epsilon schedule, device-side epsilon-greedy, the TD loss (Double DQN), ReplayRatio
replay         replay buffer on the training device: each observation stored once, stacks rebuilt when sampled
gae            generalized advantage estimation (CleanRL's done convention, next-step autoreset)
nets           the networks: CleanRL's orthogonal init, tanh MLP, Nature CNN agent, recurrent agent
speed          the CNN's CPU speed options: FrameNet (channels-last, bf16, rounded bf16), set_speed, denormal flushing
frame_norm     per-pixel normalization of uint8 frames (--normalize-frames): one pass of rlfast._C on a CPU
distributions  categorical sampling / log-prob / entropy as plain tensor ops
continuous     diagonal Gaussian policy; CleanRL's MuJoCo observation/reward wrappers on the device
normalize      RunningMeanStd, observation normalizer, reward scaler (gymnasium semantics, any device)
episodes       the one episode recorder of every trainer; Atari whole games (raw scores across lives)
pixels         the Atari PPO trainers' envs: a sync pool with its frames stacked on the training device
"""
