package responses

import (
	"fmt"

	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/task"
)

// Images in a Responses conversation: input_image parts of user messages
// ({type: "input_image", image_url: "data:…" | "https://…", detail}),
// each read as OpenAI's chat reads an image_url (wire.ImageURL) and
// standing in its message's text as the media marker. A stored response
// keeps its input items as sent, so a turn that continues one reads its
// images again: the same bytes, the same digest, the prefix cache warm
// past them (a remote image is fetched again).

// respImages collects a conversation's images in the order their parts
// are read.
type respImages struct {
	images [][]byte
	remote []media.Remote
}

// reader is how a message of role at where reads its image parts: a
// user's are taken, any other role's refused (a template may show only
// the user's), as are all when r is nil.
func (r *respImages) reader(role, where string) func(j int, p respTextPart) (string, error) {
	if r == nil || role != "user" {
		return func(j int, p respTextPart) (string, error) {
			return "", fmt.Errorf("[%d]: input_image parts are taken in user messages only", j)
		}
	}
	return func(j int, p respTextPart) (string, error) {
		at := fmt.Sprintf("%s.content[%d]", where, j)
		switch p.Detail {
		case "", "auto", "low", "high", "original":
			// The projector sees every image at its one resolution.
		default:
			return "", fmt.Errorf("[%d].detail: %q is not one of auto, low, high, original", j, p.Detail)
		}
		switch {
		case p.FileID != "":
			return "", fmt.Errorf("[%d].file_id: images are not read from uploaded files on this server; send image_url (a data URL, or an http(s) URL with --allow-remote-media)", j)
		case p.ImageURL == "":
			return "", fmt.Errorf("[%d]: an input_image part needs image_url", j)
		}
		if err := wire.ImageURL(p.ImageURL, "input", at+".image_url", &r.images, &r.remote); err != nil {
			return "", fmt.Errorf("[%d].image_url: %v", j, err)
		}
		return task.MediaMarker, nil
	}
}

// storableImage refuses an input_image part a conversation should not
// keep, since every later turn would be refused for it: one a user
// message's reader would refuse, a data URL whose image Check refuses.
func storableImage(role string, j int, p respTextPart) error {
	var img respImages
	if _, err := img.reader(role, "")(j, p); err != nil {
		return itemErr("content", "%v", err)
	}
	for _, b := range img.images {
		if _, err := media.Check(b); b != nil && err != nil {
			return itemErr(fmt.Sprintf("content[%d].image_url", j), "%v", err)
		}
	}
	return nil
}
