"""An MCP server whose tools ask the user through elicitation (a form and a URL).

On the 2026-07-28 protocol a server asks mid-call by answering ``input_required``
and reading the client's answers when it retries the call.
"""

from typing import Annotated, Literal

import mcp_types as types
import trio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel, Field


class Booking(BaseModel):
    name: str = Field(description="who travels")
    seats: int = Field(description="how many seats")
    window: bool = Field(default=False, description="a window seat")
    cabin: Literal["economy", "business"] = "economy"
    budget: float = Field(description="most to spend")
    note: str | None = None


def ask_booking() -> Elicit[Booking]:
    return Elicit("Who is travelling?\x1b[31m", Booking)


server = MCPServer("eliciting", log_level="WARNING")


@server.tool(description="Book a trip: asks who travels and how.")
async def book(answer: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> str:
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        return (
            f"booked {data.name} x{data.seats} window={data.window} cabin={data.cabin} "
            f"budget={data.budget} note={data.note}"
        )
    return f"not booked: {answer.action}"


@server.tool(description="Sign in: asks the user to visit a page.")
async def sign_in(ctx: Context) -> str | types.InputRequiredResult:
    answers = ctx.input_responses or {}
    if "login" not in answers:
        request = types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                mode="url",
                message="Sign in to continue",
                url="https://example.invalid/login",
                elicitation_id="e-1",
            )
        )
        return types.InputRequiredResult(input_requests={"login": request}, request_state="s")
    result = answers["login"]
    return f"sign-in: {getattr(result, 'action', result)}"


if __name__ == "__main__":
    trio.run(server.run_stdio_async)
