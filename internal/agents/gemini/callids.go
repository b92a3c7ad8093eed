package gemini

import "fmt"

// callIDs gives a tool call recorded without an id (older CLI versions,
// other tools' files) a stable one from its position, and a result
// recorded without an id the id of the call it answers: Gemini pairs a
// functionResponse with its functionCall by name, in order. Without this
// such a call was lost, and its result with it.
type callIDs struct {
	byName map[string][]string // tool name -> ids made for its calls, in order
	first  map[string]int      // tool name -> index of the first one maybe unanswered
}

func newCallIDs() *callIDs {
	return &callIDs{byName: map[string][]string{}, first: map[string]int{}}
}

// call is id, or when it is "" one made from the record's id and the
// call's place in it (where is "call" or "part", the two places Gemini
// records calls), the same on every read of the file.
func (c *callIDs) call(id, name, rec, where string, i int) string {
	if id != "" {
		return id
	}
	id = fmt.Sprintf("cast-%s-%s%d", rec, where, i)
	c.byName[name] = append(c.byName[name], id)
	return id
}

// answer is the id an id-less result of tool name answers: the first call
// of that name made an id here and not yet answered, else (a result
// recorded twice) the last one. ok is false when there is no such call.
func (c *callIDs) answer(name string, answered map[string]bool) (id string, ok bool) {
	q := c.byName[name]
	if len(q) == 0 {
		return "", false
	}
	for c.first[name] < len(q) && answered[q[c.first[name]]] {
		c.first[name]++
	}
	if c.first[name] < len(q) {
		return q[c.first[name]], true
	}
	return q[len(q)-1], true
}
