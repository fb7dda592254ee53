"""Arm inverse kinematics: joint angles that put a 3-D arm's gripper on a target, pointing down.

Sixteen copies of a four-joint arm (a turntable, then shoulder, elbow and wrist hinges) each get
a target. One launch per joint extends every arm's pose: the joint's rotation is
``wp.quat_from_axis_angle``, its link is turned with ``wp.quat_rotate``, and the result is
composed onto the parent pose with ``wp.transform_multiply``. The loss adds the squared distance
from the gripper (the translation of the last pose) to the target and how far the gripper,
turned by ``wp.transform_get_rotation``, is from pointing straight down.
``difftape.optim.Adam`` updates the 16 x 4 array of joint angles.

Run ``python -m examples.arm_ik``. Look at the loss on the progress bar and in
``out/arm_ik/loss.png``, at ``out/arm_ik/arms.png`` (four of the arms in their first pose in
grey and fitted pose in colour, the targets as crosses), and at the chain of joint launches in
``out/arm_ik/tape.svg``.
"""

import numpy as np
from matplotlib.figure import Figure

import difftape as wp
import difftape.optim

try:
    from examples import _reporting as report
except ImportError:  # run as a script: python examples/arm_ik.py
    import _reporting as report

ARMS = 16
# Each joint: the axis it turns about (in its own frame), then the link to the next joint.
AXES = [(0, 1, 0), (0, 0, 1), (0, 0, 1), (0, 0, 1)]
LINKS = [(0, 0.3, 0), (0.5, 0, 0), (0.4, 0, 0), (0.2, 0, 0)]
POINTING_WEIGHT = 0.1


@wp.kernel
def add_joint(parent: wp.array(dtype=wp.transform), angles: wp.array2d(dtype=float), joint: int,
              axis: wp.vec3, link: wp.vec3, child: wp.array(dtype=wp.transform)):
    i = wp.tid()
    turn = wp.quat_from_axis_angle(axis, angles[i, joint])
    # Turn about the joint's axis, then move along the turned link to the next joint.
    local = wp.transform(wp.quat_rotate(turn, link), turn)
    child[i] = wp.transform_multiply(parent[i], local)


@wp.kernel
def reach_loss(gripper: wp.array(dtype=wp.transform), target: wp.array(dtype=wp.vec3),
               pointing_weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    tip = wp.transform_get_translation(gripper[i])
    d = tip - target[i]
    # The gripper points along its last link (local x); we want that to be straight down.
    pointing = wp.quat_rotate(wp.transform_get_rotation(gripper[i]), wp.vec3(1.0, 0.0, 0.0))
    miss = 1.0 + pointing[1]  # 0 when pointing along -y
    wp.atomic_add(loss, 0, wp.dot(d, d) + pointing_weight * miss * miss)


def targets(n: int) -> np.ndarray:
    """Reachable targets on a ring around the arm's base, 0.3 to 0.6 m up."""
    rng = np.random.default_rng(7)
    azimuth = rng.uniform(-2.0, 2.0, n)
    radius = rng.uniform(0.35, 0.7, n)
    height = rng.uniform(0.3, 0.6, n)
    return np.stack([radius * np.cos(azimuth), height, -radius * np.sin(azimuth)], axis=1)


def plot_arms(run: report.Run, first: np.ndarray, last: np.ndarray, target: np.ndarray):
    """Four arms in 3-D, their first (grey) and fitted (coloured) poses, and their targets."""
    fig = Figure(figsize=(6, 5.5), tight_layout=True)
    ax = fig.add_subplot(projection="3d")
    for k, color in zip(range(4), ["tab:blue", "tab:orange", "tab:green", "tab:purple"]):
        # Plot (x, -z, y) so that y, the arm's up, is up on the page.
        ax.plot(first[k, :, 0], -first[k, :, 2], first[k, :, 1], color="tab:gray", alpha=0.5)
        ax.plot(last[k, :, 0], -last[k, :, 2], last[k, :, 1], "-o", color=color, markersize=3)
        ax.scatter([target[k, 0]], [-target[k, 2]], [target[k, 1]], marker="x", color=color,
                   s=60)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("-z (m)")
    ax.set_zlabel("y (m)")
    path = run.folder / "arms.png"
    fig.savefig(path, dpi=100)
    run.files.append(path)


def reach(angles: wp.array, target: wp.array):
    """Record the arms' forward kinematics and the loss on a new tape; returns the tape, the
    loss and the pose after each joint (identity transforms at the base first)."""
    base = wp.array(np.tile([0, 0, 0, 0, 0, 0, 1.0], (ARMS, 1)), dtype=wp.transform)
    poses = [base]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for joint, (axis, link) in enumerate(zip(AXES, LINKS)):
            poses.append(wp.zeros(ARMS, dtype=wp.transform, requires_grad=True))
            wp.launch(add_joint, dim=ARMS,
                      inputs=[poses[-2], angles, joint, wp.vec3(*axis), wp.vec3(*link)],
                      outputs=[poses[-1]])
        wp.launch(reach_loss, dim=ARMS, inputs=[poses[-1], target, POINTING_WEIGHT],
                  outputs=[loss])
    return tape, loss, poses


def joint_positions(poses: list) -> np.ndarray:
    """(arm, joint, xyz): the translations of the poses (a transform stores p, then q)."""
    return np.stack([pose.numpy()[:, :3] for pose in poses], axis=1)


def main(iterations: int = 200, output_dir=None) -> report.Run:
    """Fit the joint angles; returns the run (losses, output folder, files written)."""
    run = report.start("arm_ik", iterations, output_dir)
    target = wp.array(targets(ARMS), dtype=wp.vec3)
    # First guess: every arm facing +x, shoulder raised, elbow and wrist bent down.
    first_pose = np.tile([0.0, 0.6, -0.8, -0.6], (ARMS, 1))
    angles = wp.array(first_pose, dtype=float, requires_grad=True)
    optimizer = difftape.optim.Adam([angles], lr=0.05)

    bar = report.progress(run)
    for it in bar:
        tape, loss, poses = reach(angles, target)
        tape.backward(loss)
        report.record(run, bar, it, float(loss.numpy()[0]))
        if it == 0:
            first = joint_positions(poses)
        if it == iterations - 1:
            tape.visualize(str(report.graph_path(run)))
        else:
            optimizer.step([angles.grad])
        tape.zero()

    last = joint_positions(poses)
    plot_arms(run, first, last, target.numpy())
    miss = np.linalg.norm(last[:, -1] - target.numpy(), axis=1)
    return report.finish(run, f"grippers end {miss.mean() * 1000:.1f} mm from their targets on "
                              f"average (worst {miss.max() * 1000:.1f} mm)")


if __name__ == "__main__":
    report.command_line(main, iterations=200)
