package netboxtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

func ExampleServer() {
	srv := netboxtest.New(&netboxtest.Config{Users: []string{"admin"}})
	defer srv.Close()
	if _, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 48}); err != nil {
		panic(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/dcim/interfaces/?device=usw&limit=2", nil)
	req.Header.Set("Authorization", "Token "+srv.Token("admin"))
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer rsp.Body.Close()
	var page struct {
		Count   int
		Results []struct{ Name string }
	}
	if err := json.NewDecoder(rsp.Body).Decode(&page); err != nil {
		panic(err)
	}
	fmt.Println(rsp.StatusCode, page.Count, page.Results[0].Name, page.Results[1].Name, srv.RequestCount())
	// Output:
	// 200 48 Port 1 Port 2 1
}
