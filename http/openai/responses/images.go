package responses

import (
	"fmt"
	"io"

	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/task"
)

// Images in a Responses conversation: input_image parts of user messages
// ({type: "input_image", image_url: "data:…" | "https://…", detail}),
// each read as OpenAI's chat reads an image_url (wire.ImageURL), or
// {file_id} read from the server's files (/v1/files, under --data-dir),
// standing in its message's text as the media marker. A stored response
// keeps its input items as sent, so a turn that continues one reads its
// images again: the same bytes, the same digest, the prefix cache warm
// past them (a remote image is fetched again).

// respImages collects a conversation's images in the order their parts
// are read.
type respImages struct {
	images [][]byte
	remote []media.Remote
	// file reads an uploaded file's bytes (nil: the server keeps none).
	file func(id string) ([]byte, error)
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
		case p.FileID != "" && p.ImageURL != "":
			return "", fmt.Errorf("[%d]: an input_image part names its image by image_url or by file_id, not both", j)
		case p.FileID != "":
			return r.fromFile(j, p.FileID)
		case p.ImageURL == "":
			return "", fmt.Errorf("[%d]: an input_image part needs image_url or file_id", j)
		}
		if err := wire.ImageURL(p.ImageURL, "input", at+".image_url", &r.images, &r.remote); err != nil {
			return "", fmt.Errorf("[%d].image_url: %v", j, err)
		}
		return task.MediaMarker, nil
	}
}

// fromFile reads an input_image's file into the images.
func (r *respImages) fromFile(j int, id string) (string, error) {
	if len(r.images) >= media.MaxImages {
		return "", fmt.Errorf("[%d]: a request carries at most %d images", j, media.MaxImages)
	}
	if r.file == nil {
		return "", fmt.Errorf("[%d].file_id: this server keeps no files (start it with --data-dir); send image_url (a data URL, or an http(s) URL with --allow-remote-media)", j)
	}
	if err := CheckID(id, "file_id", ""); err != nil {
		return "", fmt.Errorf("[%d].file_id: %v", j, wire.AsError(err).Msg)
	}
	b, err := r.file(id)
	if err != nil {
		return "", fmt.Errorf("[%d].file_id: %v", j, err)
	}
	r.images = append(r.images, b)
	return task.MediaMarker, nil
}

// imageFile reads file id of the server's files, at most the inline
// image limit.
func (st *Store) imageFile(id string) ([]byte, error) {
	fs := st.files.Load()
	if fs == nil {
		return nil, fmt.Errorf("this server keeps no files (start it with --data-dir)")
	}
	f, obj, err := fs.OpenFile(id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if obj.Bytes > wire.MaxMediaBytes {
		return nil, fmt.Errorf("file %s is %d bytes: an image may be at most %d", id, obj.Bytes, wire.MaxMediaBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, wire.MaxMediaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading file %s: %v", id, err)
	}
	if len(b) > wire.MaxMediaBytes {
		return nil, fmt.Errorf("file %s is over %d bytes: too large for an image", id, wire.MaxMediaBytes)
	}
	return b, nil
}

// storableImage refuses an input_image part a conversation should not
// keep, since every later turn would be refused for it: one a user
// message's reader would refuse, a data URL whose image Check refuses.
func storableImage(role string, j int, p respTextPart) error {
	// A file is read when a turn reads the item; here it is only named.
	img := respImages{file: func(string) ([]byte, error) { return nil, nil }}
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
