"""Train a small PyTorch network through a difftape simulation step.

A torch MLP looks at each particle (position, velocity, goal) and predicts the force to push it
with. One semi-implicit Euler step with gravity and quadratic drag, written as a difftape kernel
on ``wp.vec3``, moves the particles and scores how far they land from their goals.
``difftape.torch.tape_function`` makes that step a torch operation, so ``loss.backward()`` runs the
difftape tape and the gradient reaches the network's weights. Needs PyTorch.
Run: ``python -m examples.torch_training``.
"""

from __future__ import annotations

import torch

import difftape as wp
import difftape.torch

MASS = 0.5
DRAG = 0.1


@wp.kernel
def euler_step(x0: wp.array(dtype=wp.vec3), v0: wp.array(dtype=wp.vec3),
               force: wp.array(dtype=wp.vec3), goal: wp.array(dtype=wp.vec3), dt: float,
               x1: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    v = v0[i]
    accel = force[i] / MASS + wp.vec3(0.0, -9.81, 0.0) - DRAG * wp.length(v) * v
    v_new = v + accel * dt
    x = x0[i] + v_new * dt
    x1[i] = x
    d = x - goal[i]
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(len(x0)))


@difftape.torch.tape_function(dtypes=[wp.vec3, wp.vec3, wp.vec3, wp.vec3])
def simulate(x0, v0, force, goal, dt):
    """One step for every particle: the new positions and the mean squared miss (difftape)."""
    x1 = wp.zeros_like(x0, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(euler_step, dim=len(x0), inputs=[x0, v0, force, goal, dt], outputs=[x1, loss])
    return x1, loss


class Controller(torch.nn.Module):
    """A two-layer MLP from (position, velocity, goal) to a force."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(9, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, 3))

    def forward(self, x, v, goal):
        return 10.0 * self.net(torch.cat([x, v, goal], dim=1))


def main(iterations: int = 60, particles: int = 64, seed: int = 0) -> list[float]:
    """Train the controller; returns the loss before each optimizer step."""
    torch.manual_seed(seed)
    x0 = torch.rand(particles, 3)
    v0 = torch.randn(particles, 3)
    goal = x0 + 0.2 * torch.randn(particles, 3)
    dt = 0.1
    model = Controller()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for it in range(iterations):
        optimizer.zero_grad()
        force = model(x0, v0, goal)
        _, loss = simulate(x0, v0, force, goal, dt)
        loss.sum().backward()
        optimizer.step()
        losses.append(loss.item())
        if it % 10 == 0 or it == iterations - 1:
            print(f"step {it:3d}  loss {losses[-1]:.5f}")
    return losses


if __name__ == "__main__":
    main()
