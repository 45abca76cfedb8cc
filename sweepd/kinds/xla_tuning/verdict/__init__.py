"""When the search stops and what its verdict says: the stop rules (`stops`, the 8 h stop's
reading of the bounded rule in `timebox_bounded`, what must run before a bounded verdict in
`bounded_question` and `bounded_stack`), the recipe a verdict names and how it words its claim
(`verdicts`, `verdict_claim`), the report block before the 8 h stop (`closing_block`), the
verdict as a structure (`structure`: rule, outcome, recipe, gain, typed caveats), its one
renderer (`render`), the verdict in a user's words (`plain_words`), and its word on a cell
whose runs measured far less noise than the rules assume (`quiet`, deciding nothing)."""
