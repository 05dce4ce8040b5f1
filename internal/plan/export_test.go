package plan

// Plain and General are the plain and the general entries' planning for
// the external tests, which compare the copy plans with a2a/ref, for
// AllGathers of strided inputs too (Make refuses them: the plain entries
// cannot walk them, and AllGather has no general form).
func Plain(r Request, env Env, ts Tokens) (Plan, error) { return plain(&r, &env, ts) }

func General(r Request, env Env, ts Tokens) (Plan, error) {
	return general(&r, &env, ts, r.sharedGeneral(env.World))
}
