# The seed-004 admission rules (admit: invalid input, the call's tenant,
# stale policy, the tool unknown, disabled, unreviewed, stale schema, the
# actor's scopes) plus the rules toolcrib's Check adds on the same facts
# (confirmation, json.match_schema of the arguments), in Check's order,
# over data.json: the same world as the admission benchmark's (seed 004:
# tenant demo-a, alice granted shipment:read and shipment:write).
# `make bench-peers` serves it with `opa run --server`.
package toolcrib.admission

tool := data.tools[input.tool_id]

tenant := data.tenants[input.actor.tenant]

invalid_input if not is_string(input.descriptor_digest)

invalid_input if input.descriptor_digest == ""

invalid_input if not is_number(input.generation)

invalid_input if input.generation <= 0

invalid_input if not is_number(input.now_ms)

invalid_input if not is_object(input.arguments)

other_tenant if {
	input.audience_class != ""
	not startswith(input.audience_class, concat("", [input.actor.tenant, "."]))
}

stale_policy if input.now_ms >= tenant.policy_valid_until_ms

unknown_tool if not data.tools[input.tool_id]

grant := object.get(tenant.grants, input.actor.sub, {"classes": [], "scopes": []})

# A tool whose class none of the actor's grants reaches is not visible.
unreachable if not tool.class in grant.classes

disabled if not tool.enabled

unreviewed if tool.approved_digest != tool.descriptor_digest

stale_schema if input.descriptor_digest != tool.descriptor_digest

no_scope if not tool.scope in grant.scopes

needs_confirmation if {
	tool.confirmation_always
	input.mode != "user_confirmed"
}

arguments_invalid if {
	[ok, _] := json.match_schema(input.arguments, tool.input_schema)
	not ok
}

reason := "INVALID_INPUT" if invalid_input
else := "FORBIDDEN" if other_tenant
else := "STALE_POLICY" if stale_policy
else := "NOT_FOUND" if unknown_tool
else := "NOT_FOUND" if unreachable
else := "DISABLED" if disabled
else := "UNREVIEWED" if unreviewed
else := "STALE_SCHEMA" if stale_schema
else := "FORBIDDEN" if no_scope
else := "CONFIRMATION_REQUIRED" if needs_confirmation
else := "ARGUMENTS_INVALID" if arguments_invalid
else := "ALLOW"

decision := {"allow": reason == "ALLOW", "reason": reason}
