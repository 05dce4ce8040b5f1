package ptxtext

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `// made by hand
.version 7.8
.target sm_70
.address_size 64

	// .globl	a
.visible .entry a(
	.param .align 8 .b8 a_param_0[8]
)
{
	{
	.reg .b32 %r<2>;
	}
$L__BB0_1:
	ret;

}
// b's comment
.visible .entry b(
	.param .align 8 .b8 b_param_0[8]
)
{
	ret;
}
`

func TestSplit(t *testing.T) {
	f, err := Split([]byte(sample))
	require.NoError(t, err)
	require.Len(t, f.Entries, 2)
	assert.Equal(t, "a", f.Entries[0].Name)
	assert.Equal(t, "b", f.Entries[1].Name)
	assert.Equal(t, "// made by hand\n.version 7.8\n.target sm_70\n.address_size 64\n", sample[:f.HeaderEnd])
	assert.Regexp(t, `^\.visible \.entry a\(\n(.|\n)*\$L__BB0_1:\n\tret;\n\n}\n$`, sample[f.Entries[0].Start:f.Entries[0].End])
	assert.Regexp(t, `^\.visible \.entry b\((.|\n)*\tret;\n}\n$`, sample[f.Entries[1].Start:f.Entries[1].End])

	img := f.Image([]byte(sample), []int{1})
	assert.Equal(t, sample[:f.HeaderEnd]+"\n"+sample[f.Entries[1].Start:f.Entries[1].End]+"\n\x00", string(img))
	assert.Len(t, img, cap(img), "Image sizes its buffer exactly")
}

// Anything at the top level besides the header, comments and entries
// (something entries could share) is refused.
func TestSplitRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"func":        sample + ".visible .func f()\n{\n}\n",
		"global":      sample + ".global .align 4 .u32 g;\n",
		"extern":      ".version 7.8\n.target sm_70\n.address_size 64\n.extern .func x();\n" + sample[len("// made by hand\n.version 7.8\n.target sm_70\n.address_size 64\n"):],
		"unclosed":    ".version 7.8\n.address_size 64\n.visible .entry a(\n{\n\tret;\n",
		"nested":      ".version 7.8\n.address_size 64\n.visible .entry a(\n{\n.visible .entry b(\n{\n}\n",
		"no header":   ".visible .entry a(\n{\n}\n",
		"no entries":  ".version 7.8\n.address_size 64\n",
		"bad name":    ".version 7.8\n.address_size 64\n.visible .entry (\n{\n}\n",
		"no paren":    ".version 7.8\n.address_size 64\n.visible .entry a\n{\n}\n",
		"stray label": ".version 7.8\n.address_size 64\n$L:\n",
	} {
		_, err := Split([]byte(text))
		assert.ErrorIs(t, err, ErrLayout, name)
	}
}
